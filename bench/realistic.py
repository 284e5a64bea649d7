#!/usr/bin/env python3
"""The realistic corpus of `make bench`: distinct requests from simulated clients of a web shop.

    python3 bench/realistic.py [--out target/realistic] [--requests 20000] [--clients 400] [--seed 1]
    python3 bench/realistic.py --ensure          # write the corpus only when missing or made otherwise
    python3 bench/realistic.py check [--modsec]  # every request through CRS PL1 blocking (wafer, ModSecurity)

Stdlib only, deterministic (the same options give the same bytes), ~2 s for 20,000 requests.

Each simulated client keeps what a real one keeps across its requests: its User-Agent (browsers
of several versions and systems, two mobile apps, API clients), Accept-Language and
Accept-Encoding, its cookies (session id, CSRF token, consent and analytics cookies: the
analytics cookie carries the time of the last hit, as Google Analytics' does) and its bearer
token. What changes from request to request: the path, query values, request ids, the Referer
(the client's last page) and bodies. The mix is a web shop's: page GETs with cookies and Referer
(40%), static assets (25%), API GETs with bearer tokens, id lists, pagination, filters and search
terms (20%), JSON writes of 0.2-6 KB with names, addresses, e-mail addresses, phone numbers,
prices and free text in English, French, German, Spanish and Japanese (15%). Query values are
UTF-8 percent-encoded as browsers and HTTP libraries encode them.

Writes into OUT (the corpus is never committed; `--ensure` rewrites it when the options or this
file changed):
  requests.raw        every request, each as "<length> <id>\\n" and then <length> bytes of raw
                      HTTP/1.1 (bench/conf/wrk.lua with WRK_CORPUS and the bench crate's corpus-rate read it)
  requests-KIND.raw   the same for one kind (page, static, api, write)
  requests.jsonl      {"id", "kind", "client", "raw": base64} per line: what `wafer ids CONFIG`
                      and tests/oracle/modsec_ids.py read
  meta.json           the options, this file's hash, counts by kind and sizes

What CRS 4.28 PL1 blocks is left out (docs/benchmarks.md, "What the CRS blocks"): writes are
POSTs (its default `tx.allowed_methods` refuses PUT and PATCH, rule 911100), SKUs do not start
with a Unix command's name ("CHEF-8911": rule 932260), and only browsers, which send a Referer,
name a field `session_id` (without a Referer: rule 943120). `--findings` puts them back in.

`check` runs requests.jsonl through `wafer ids` with the configuration `make bench` calls "CRS
PL1" (and with `--modsec`, through libmodsecurity 3.0.15 with tests/oracle/modsec_ids.py) and
exits 1 when any request is blocked; it prints the rules that matched without blocking.
"""
import argparse
import base64
import collections
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
KINDS = ("page", "static", "api", "write")
MIX = {"page": 40, "static": 25, "api": 20, "write": 15}
HOST = "shop.example.com"
API_HOST = "api.shop.example.com"

# -- what a shop holds --------------------------------------------------------------------------

CATEGORIES = {
    "running-shoes": ["trail-running-shoe", "road-running-shoe", "carbon-racing-shoe", "cushioned-daily-trainer"],
    "hiking": ["waterproof-hiking-boot", "lightweight-hiking-pole", "merino-hiking-sock", "ultralight-tent-2p"],
    "outdoor-jackets": ["3-layer-rain-jacket", "down-puffer-jacket", "softshell-jacket", "windbreaker-packable"],
    "cycling": ["gravel-bike-helmet", "bib-shorts-pro", "clipless-pedals", "bike-computer-gps"],
    "yoga": ["cork-yoga-block", "non-slip-yoga-mat", "yoga-strap-cotton", "meditation-cushion"],
    "kitchen": ["cast-iron-skillet-28cm", "chef-knife-20cm", "espresso-grinder-burr", "stainless-saucepan-set"],
    "home-office": ["ergonomic-office-chair", "standing-desk-frame", "monitor-arm-dual", "mechanical-keyboard-tkl"],
    "kids": ["kids-rain-boots", "balance-bike-12", "wooden-train-set", "kids-backpack-10l"],
}
CATEGORY_CODES = {"running-shoes": "RS", "hiking": "HK", "outdoor-jackets": "OJ", "cycling": "CY", "yoga": "YG",
                  "kitchen": "KT", "home-office": "HO", "kids": "KD"}
SIZES = ["XS", "S", "M", "L", "XL", "38", "39", "40", "41", "42", "43", "44", "45", "one-size"]
COLORS = ["black", "navy", "forest-green", "sand", "red", "white", "grey", "ocean-blue", "olive"]
SORTS = ["relevance", "price-asc", "price-desc", "newest", "rating", "bestsellers"]
SEARCHES = {
    "en": ["running shoes", "rain jacket men", "waterproof boots size 42", "yoga mat", "gift for dad",
           "cast iron pan", "kids bike helmet", "standing desk", "merino socks", "black friday deals"],
    "fr": ["chaussures de randonnée", "veste imperméable femme", "tapis de yoga épais", "cadeau fête des pères",
           "poêle en fonte", "vélo enfant 4 ans", "chaussettes mérinos", "sac à dos 30 l"],
    "de": ["Laufschuhe Herren", "Regenjacke wasserdicht", "Wanderschuhe Größe 43", "Yogamatte rutschfest",
           "Geschenk für Kinder", "Gusseisenpfanne", "Fahrradhelm Kinder", "Schreibtischstuhl ergonomisch"],
    "es": ["zapatillas de correr", "chaqueta impermeable mujer", "esterilla de yoga", "regalo para niños",
           "sartén de hierro fundido", "casco de bicicleta", "mochila de montaña"],
    "ja": ["ランニングシューズ", "レインジャケット メンズ", "ヨガマット 厚手", "登山靴 防水", "キッズ 自転車",
           "鋳鉄 フライパン", "メリノウール 靴下"],
}
NAMES = {
    "en": (["James", "Emily", "Olivia", "Michael", "Sarah", "David", "Grace", "Liam"],
           ["Smith", "Johnson", "Brown", "Taylor", "Wilson", "Davies", "Evans", "Walker"]),
    "fr": (["Élodie", "François", "Chloé", "Jérôme", "Amélie", "Benoît", "Inès", "Loïc"],
           ["Lefèvre", "Dubois", "Moreau", "Laurent", "Girard", "Rousseau", "Fontaine", "Chevalier"]),
    "de": (["Jürgen", "Lena", "Maximilian", "Anna", "Lukas", "Sophie", "Jörg", "Hannah"],
           ["Müller", "Schneider", "Fischer", "Weiß", "Schäfer", "Krüger", "Hoffmann", "Groß"]),
    "es": (["José", "Lucía", "Martín", "Sofía", "Alejandro", "María", "Iñigo", "Begoña"],
           ["García", "Fernández", "López", "Martínez", "Sánchez", "Pérez", "Gómez", "Muñoz"]),
    "ja": (["陽翔", "結衣", "蓮", "さくら", "大翔", "美咲", "悠真", "葵"],
           ["佐藤", "鈴木", "高橋", "田中", "伊藤", "渡辺", "山本", "中村"]),
}
ADDRESSES = {
    "en": (["Baker Street", "Station Road", "Church Lane", "Victoria Avenue", "Kings Road"],
           [("London", "NW1 6XE"), ("Manchester", "M1 1AE"), ("Leeds", "LS1 4AP"), ("Bristol", "BS1 5TR")], "GB", "+44 20 7946 {:04d}"),
    "fr": (["rue de la Paix", "avenue des Champs-Élysées", "boulevard Saint-Germain", "rue Sainte-Catherine"],
           [("Paris", "75002"), ("Lyon", "69002"), ("Bordeaux", "33000"), ("Marseille", "13001")], "FR", "+33 6 12 34 {:02d} {:02d}"),
    "de": (["Hauptstraße", "Lindenallee", "Schillerstraße", "Am Mühlbach", "Königsweg"],
           [("Berlin", "10115"), ("München", "80331"), ("Köln", "50667"), ("Düsseldorf", "40213")], "DE", "+49 30 {:07d}"),
    "es": (["Calle Mayor", "Avenida de la Constitución", "Paseo de Gracia", "Calle de Alcalá"],
           [("Madrid", "28013"), ("Barcelona", "08007"), ("Sevilla", "41004"), ("Valencia", "46002")], "ES", "+34 612 {:03d} {:03d}"),
    "ja": (["千代田区丸の内", "渋谷区神南", "中央区銀座", "港区六本木"],
           [("東京都", "100-0005"), ("大阪府", "530-0001"), ("京都府", "600-8216"), ("福岡県", "810-0001")], "JP", "+81 90 {:04d} {:04d}"),
}
REVIEWS = {
    "en": ["Fits true to size and the cushioning is great on long runs.",
           "Arrived two days early, well packed. The colour is a bit darker than in the photos.",
           "Third pair I have bought, still the most comfortable shoe for my daily commute.",
           "Good value for the price, although the laces could be longer.",
           "My daughter loves it, she wears it every day to school.",
           "Kept me dry during a whole afternoon of rain in the Lake District.",
           "Customer service was quick to answer my question about the warranty."],
    "fr": ["Très confortable, je l'ai porté toute la journée sans aucune gêne.",
           "Livraison rapide et emballage soigné, rien à redire.",
           "La taille est un peu petite, je conseille de prendre une pointure au-dessus.",
           "Parfait pour les randonnées en montagne, même sous la pluie.",
           "Qualité au rendez-vous, c'est le deuxième que j'achète pour la famille.",
           "Bon rapport qualité-prix mais la couleur est plus claire qu'en photo."],
    "de": ["Sehr bequem und die Dämpfung ist auch nach 300 Kilometern noch gut.",
           "Schnelle Lieferung, alles bestens verpackt. Gerne wieder!",
           "Fällt etwas klein aus, ich würde eine Nummer größer bestellen.",
           "Hält auch bei starkem Regen dicht, absolute Kaufempfehlung.",
           "Die Verarbeitung ist hochwertig, nur die Schnürsenkel sind etwas kurz.",
           "Für den Preis völlig in Ordnung, die Farbe entspricht der Abbildung."],
    "es": ["Muy cómodas, las uso a diario para ir al trabajo.",
           "El envío llegó antes de lo previsto y bien embalado.",
           "La talla es un poco grande, recomiendo pedir una menos.",
           "Perfecta para la montaña, no pasa nada de agua.",
           "Buena relación calidad-precio, aunque el color es algo más oscuro.",
           "Es el segundo que compro, a mi hijo le encanta."],
    "ja": ["とても履き心地が良く、長時間歩いても疲れにくいです。",
           "注文から二日で届きました。梱包も丁寧でした。",
           "サイズは少し小さめなので、ワンサイズ上がおすすめです。",
           "雨の日でも中まで濡れず、とても満足しています。",
           "色味は写真よりやや暗めですが、品質は値段以上だと思います。"],
}
TITLES = {"en": ["Great shoe", "Does the job", "Love it", "Solid quality"],
          "fr": ["Très bien", "Parfait", "Bon achat", "Conforme à la description"],
          "de": ["Top Qualität", "Sehr zufrieden", "Gutes Produkt", "Passt perfekt"],
          "es": ["Muy buena compra", "Recomendable", "Me encanta", "Calidad excelente"],
          "ja": ["大満足です", "おすすめです", "買ってよかった", "品質が良い"]}
NOTES = {"en": ["Please leave the parcel with the neighbour at number 12.", "Gift wrap please, it is a birthday present."],
         "fr": ["Merci de laisser le colis chez la gardienne.", "Emballage cadeau s'il vous plaît."],
         "de": ["Bitte beim Nachbarn im Erdgeschoss abgeben.", "Bitte als Geschenk verpacken."],
         "es": ["Por favor, dejar el paquete en conserjería.", "Envolver para regalo, gracias."],
         "ja": ["不在の場合は宅配ボックスに入れてください。", "ギフト包装をお願いします。"]}
LANG_HEADERS = {
    "en": ["en-US,en;q=0.9", "en-GB,en;q=0.9", "en-GB,en-US;q=0.9,en;q=0.8"],
    "fr": ["fr-FR,fr;q=0.9,en-US;q=0.8,en;q=0.7", "fr-FR,fr;q=0.9", "fr-CH,fr;q=0.9,de;q=0.8,en;q=0.7"],
    "de": ["de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7", "de-AT,de;q=0.9,en;q=0.8", "de,en-US;q=0.7,en;q=0.3"],
    "es": ["es-ES,es;q=0.9,en;q=0.8", "es-MX,es;q=0.9,en;q=0.8", "es-ES,es;q=0.9"],
    "ja": ["ja,en-US;q=0.9,en;q=0.8", "ja-JP,ja;q=0.9"],
}
CURRENCY = {"en": "GBP", "fr": "EUR", "de": "EUR", "es": "EUR", "ja": "JPY"}
EVENTS = ["page_view", "view_item", "add_to_cart", "begin_checkout", "view_item_list", "select_item", "scroll"]
# One front-end build: its scripts, styles and fonts have the same names for every client.
BUILD = "4f7c2a9e"
SCRIPTS = ["main", "vendor", "runtime", "product", "checkout", "search", "account"]


def lang_weights(rng):
    return rng.choices(list(LANG_HEADERS), weights=[40, 18, 22, 12, 8])[0]


# -- clients ------------------------------------------------------------------------------------

def browser(rng):
    """(User-Agent, client hints or None, Accept of a page, the engine family) of a browser."""
    kind = rng.choices(["chrome-win", "chrome-mac", "edge", "firefox-win", "firefox-linux", "safari-mac",
                        "safari-ios", "chrome-android", "samsung"], weights=[26, 10, 8, 6, 3, 9, 20, 14, 4])[0]
    cv = rng.randint(124, 131)
    chrome_accept = ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
                     "application/signed-exchange;v=b3;q=0.7")
    hints = lambda brand, platform, mobile: {  # noqa: E731
        "sec-ch-ua": f'"{brand}";v="{cv}", "Chromium";v="{cv}", "Not_A Brand";v="24"',
        "sec-ch-ua-mobile": "?1" if mobile else "?0", "sec-ch-ua-platform": f'"{platform}"'}
    if kind == "chrome-win":
        return (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 "
                "Safari/537.36", hints("Google Chrome", "Windows", False), chrome_accept, "chrome")
    if kind == "chrome-mac":
        return (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 "
                "Safari/537.36", hints("Google Chrome", "macOS", False), chrome_accept, "chrome")
    if kind == "edge":
        return (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 "
                f"Safari/537.36 Edg/{cv}.0.{rng.randint(2000, 2900)}.{rng.randint(40, 120)}",
                hints("Microsoft Edge", "Windows", False), chrome_accept, "chrome")
    if kind == "chrome-android":
        return (f"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 Mobile "
                "Safari/537.36", hints("Google Chrome", "Android", True), chrome_accept, "chrome")
    if kind == "samsung":
        return (f"Mozilla/5.0 (Linux; Android {rng.choice([13, 14])}; SAMSUNG SM-S91{rng.randint(1, 8)}B) AppleWebKit/537.36 "
                f"(KHTML, like Gecko) SamsungBrowser/{rng.choice(['24.0', '25.0', '26.0'])} Chrome/{cv - 4}.0.0.0 Mobile "
                "Safari/537.36", hints("Samsung Internet", "Android", True), chrome_accept, "chrome")
    if kind.startswith("firefox"):
        fv = rng.randint(125, 133)
        system = "Windows NT 10.0; Win64; x64" if kind == "firefox-win" else rng.choice(
            ["X11; Linux x86_64", "X11; Ubuntu; Linux x86_64"])
        return (f"Mozilla/5.0 ({system}; rv:{fv}.0) Gecko/20100101 Firefox/{fv}.0", None,
                "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "firefox")
    sv = rng.choice(["17.4", "17.5", "17.6", "18.0", "18.1"])
    if kind == "safari-mac":
        return (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{sv} "
                "Safari/605.1.15", None, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "safari")
    ios = sv.replace(".", "_") + rng.choice(["", "_1"])
    return (f"Mozilla/5.0 (iPhone; CPU iPhone OS {ios} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            f"Version/{sv} Mobile/15E148 Safari/604.1", None,
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "safari")


def token(rng, n, alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"):
    return "".join(rng.choice(alphabet) for _ in range(n))


def hexs(rng, n):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def uuid(rng):
    h = hexs(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{rng.choice('89ab')}{h[17:20]}-{h[20:]}"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(rng, sub, now):
    head = b64url(b'{"alg":"RS256","typ":"JWT","kid":"k-2026-11"}')
    body = b64url(json.dumps({"iss": "https://auth.shop.example.com/", "sub": str(sub), "aud": "shop-api",
                              "iat": now, "exp": now + 3600, "scope": "orders:read orders:write cart profile"},
                             separators=(",", ":")).encode())
    return f"{head}.{body}.{b64url(bytes(rng.getrandbits(8) for _ in range(64)))}"


class Client:
    """A simulated client: what it keeps across its requests, and where it is."""

    def __init__(self, rng, n, t0):
        self.n = n
        self.rng = rng
        self.lang = lang_weights(rng)
        self.accept_language = rng.choice(LANG_HEADERS[self.lang])
        self.kind = rng.choices(["browser", "app", "api"], weights=[82, 13, 5])[0]
        self.user = rng.randint(10_000, 9_999_999)
        self.first, self.last = rng.choice(NAMES[self.lang][0]), rng.choice(NAMES[self.lang][1])
        self.email = (f"{ascii_name(self.first)}.{ascii_name(self.last)}{rng.randint(1, 99)}@"
                      + rng.choice(["gmail.com", "outlook.com", "yahoo.co.jp", "web.de", "orange.fr", "gmx.de",
                                    "icloud.com", "hotmail.es", "example.org"]))
        self.started = t0 - rng.randint(0, 86_400 * 30)
        self.bearer = None
        self.hints = None
        self.cookies = collections.OrderedDict()
        self.page = None
        self.viewed = []
        if self.kind == "browser":
            self.ua, self.hints, self.page_accept, self.family = browser(rng)
            self.accept_encoding = "gzip, deflate, br, zstd" if self.family == "chrome" else "gzip, deflate, br"
            self.logged_in = rng.random() < 0.45
            self.cookies["sid"] = token(rng, 32)
            self.cookies["csrftoken"] = token(rng, 40)
            if rng.random() < 0.8:
                self.cookies["cookie_consent"] = rng.choice(["necessary%2Canalytics%2Cmarketing", "necessary",
                                                             "necessary%2Canalytics"])
            if "analytics" in self.cookies.get("cookie_consent", ""):
                self.cookies["_ga"] = f"GA1.1.{rng.randint(10 ** 8, 10 ** 10 - 1)}.{self.started}"
                self.ga4 = f"_ga_{token(rng, 10, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')}"
                self.cookies[self.ga4] = ""
                if "marketing" in self.cookies["cookie_consent"]:
                    self.cookies["_fbp"] = f"fb.1.{self.started * 1000 + rng.randint(0, 999)}.{rng.randint(10 ** 9, 2 * 10 ** 9)}"
            self.cookies["locale"] = {"en": "en-GB", "fr": "fr-FR", "de": "de-DE", "es": "es-ES", "ja": "ja-JP"}[self.lang]
            self.cookies["currency"] = CURRENCY[self.lang]
            if rng.random() < 0.6:
                self.cookies["cart_id"] = uuid(rng)
            if self.logged_in:
                self.bearer = jwt(rng, self.user, t0)
        else:
            self.logged_in = True
            self.bearer = jwt(rng, self.user, t0)
            self.accept_encoding = "gzip"
            if self.kind == "app":
                ver = rng.choice(["5.12.0", "5.12.1", "5.11.4", "5.10.2"])
                if rng.random() < 0.5:
                    ios = rng.choice(["17.5.1", "17.6", "18.0.1", "18.1"])
                    self.ua = (f"ShopApp/{ver} (com.example.shop; build:{ver.replace('.', '')}; iOS {ios}) "
                               f"Alamofire/5.{rng.randint(8, 10)}.{rng.randint(0, 1)}")
                else:
                    self.ua = f"ShopApp/{ver} (Android {rng.choice([12, 13, 14, 15])}; {rng.choice(['Pixel 8', 'SM-A546B', 'SM-S918B', 'M2101K6G', 'CPH2581'])}) okhttp/4.12.0"
                self.device = uuid(rng)
            else:
                self.ua = rng.choice(["python-requests/2.32.3", "axios/1.7.7", "Go-http-client/1.1",
                                      "node-fetch/1.0 (+https://github.com/bitinn/node-fetch)", "Java-http-client/21.0.4",
                                      "okhttp/4.12.0", "PartnerSync/2.3 (+https://partner.example.net/bot)"])

    def cookie_header(self, t):
        if not self.cookies:
            return None
        if getattr(self, "ga4", None):
            # GA4's cookie: session start, session count, engaged, time of the last hit, ...
            self.cookies[self.ga4] = f"GS1.1.{self.started}.{self.n % 7 + 1}.1.{t}.0.0.0"
        if self.viewed:
            self.cookies["recently_viewed"] = "%2C".join(str(x) for x in self.viewed[-6:])
        return "; ".join(f"{k}={v}" for k, v in self.cookies.items())


def ascii_name(s):
    table = str.maketrans({"é": "e", "è": "e", "ç": "c", "ï": "i", "ô": "o", "ü": "ue", "ö": "oe", "ä": "ae",
                           "ß": "ss", "í": "i", "ñ": "n", "ó": "o", "á": "a", "ú": "u"})
    out = s.lower().translate(table)
    return out if out.isascii() else f"user{abs(sum(map(ord, s))) % 10_000}"


# -- requests -----------------------------------------------------------------------------------

def product(rng):
    cat = rng.choice(list(CATEGORIES))
    slug = rng.choice(CATEGORIES[cat])
    pid = rng.randint(100_000, 999_999)
    return cat, slug, pid


def q(params, plus=True):
    """A query string, UTF-8 percent-encoded as a browser encodes a form (spaces as +) or as
    encodeURIComponent / HTTP libraries do (%20)."""
    enc = urllib.parse.quote_plus if plus else (lambda s, safe="": urllib.parse.quote(s, safe=safe))
    return "&".join(f"{enc(k, safe='[]')}={enc(str(v), safe=',')}" for k, v in params)


def raw_request(method, target, headers, body=None):
    lines = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers if v is not None]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


class Shop:
    def __init__(self, rng, t0):
        self.rng = rng
        self.t = t0

    def browser_headers(self, c, accept, dest, mode, site, referer, extra=()):
        h = [("Host", HOST), ("User-Agent", c.ua), ("Accept", accept)]
        if c.hints:
            h += list(c.hints.items())
        h += [("Accept-Language", c.accept_language), ("Accept-Encoding", c.accept_encoding)]
        h += list(extra)
        h += [("Referer", referer), ("Sec-Fetch-Dest", dest), ("Sec-Fetch-Mode", mode), ("Sec-Fetch-Site", site)]
        h.append(("Cookie", c.cookie_header(self.t)))
        if c.family == "firefox":
            h.append(("Connection", "keep-alive"))
        return h

    def page(self, c):
        rng = self.rng
        prefix = "" if c.lang == "en" else "/" + c.lang
        r = rng.random()
        if c.page is None or r < 0.08:
            # A landing: the home page or a product from a campaign or a search engine.
            cat, slug, pid = product(rng)
            target = rng.choice([prefix + "/", f"{prefix}/p/{slug}-{pid}"])
            params = rng.choice([
                [("utm_source", "newsletter"), ("utm_medium", "email"), ("utm_campaign", f"winter_sale_{rng.randint(2025, 2026)}")],
                [("gclid", token(rng, 60, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"))],
                [("fbclid", token(rng, 50))], [("ref", "partner-" + str(rng.randint(10, 99)))], []])
            if params:
                target += "?" + q(params)
            referer = rng.choice(["https://www.google.com/", "https://www.bing.com/", "https://duckduckgo.com/",
                                  "https://l.facebook.com/", "https://mail.google.com/"])
            site = "cross-site"
        elif r < 0.30:
            cat = rng.choice(list(CATEGORIES))
            params = [("page", rng.randint(2, 12))] if rng.random() < 0.5 else []
            if rng.random() < 0.6:
                params += rng.sample([("sort", rng.choice(SORTS)), ("size", rng.choice(SIZES)),
                                      ("color", rng.choice(COLORS)), ("price_min", rng.choice([20, 50, 100])),
                                      ("price_max", rng.choice([80, 150, 300])), ("brand", rng.choice(["nordkap", "trailfox", "vela"]))],
                                     rng.randint(1, 3))
            target = f"{prefix}/c/{cat}" + ("?" + q(params) if params else "")
            referer, site = c.page, "same-origin"
        elif r < 0.60:
            cat, slug, pid = product(rng)
            c.viewed.append(pid)
            target = f"{prefix}/p/{slug}-{pid}"
            if rng.random() < 0.35:
                target += "?" + q([("color", rng.choice(COLORS)), ("size", rng.choice(SIZES))])
            referer, site = c.page, "same-origin"
        elif r < 0.80:
            words = rng.choice(SEARCHES[c.lang if rng.random() < 0.85 else "en"])
            params = [("q", words)]
            if rng.random() < 0.4:
                params.append(("page", rng.randint(2, 5)))
            if rng.random() < 0.3:
                params.append(("sort", rng.choice(SORTS)))
            target = f"{prefix}/search?" + q(params)
            referer, site = c.page, "same-origin"
        else:
            target = rng.choice(["/cart", "/checkout/shipping", "/checkout/payment", "/account", "/account/orders",
                                 f"/account/orders/{rng.randint(10 ** 7, 10 ** 8)}", "/wishlist", "/help/returns",
                                 "/stores?city=" + urllib.parse.quote_plus(rng.choice(ADDRESSES[c.lang][1])[0])])
            referer, site = c.page, "same-origin"
        extra = [("Upgrade-Insecure-Requests", "1")]
        h = self.browser_headers(c, c.page_accept, "document", "navigate", site, referer, extra)
        if site != "same-origin" or rng.random() < 0.7:
            h.insert(-1 if c.family != "firefox" else -2, ("Sec-Fetch-User", "?1"))
        if c.family == "chrome":
            h.append(("Priority", "u=0, i"))
        c.page = f"https://{HOST}{target}"
        return "GET", target, h, None

    def static(self, c):
        rng = self.rng
        r = rng.random()
        if r < 0.45:
            cat, slug, pid = product(rng)
            w = rng.choice([320, 640, 960, 1280])
            target = f"/images/products/{pid}/{slug}-{rng.randint(1, 6)}-{w}w.{rng.choice(['webp', 'avif', 'jpg'])}"
            accept = ("image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8" if c.family == "chrome" else
                      "image/webp,*/*" if c.family == "firefox" else "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5")
            dest, mode = "image", "no-cors"
        elif r < 0.75:
            name = rng.choice(SCRIPTS)
            target = f"/static/js/{name}.{BUILD}.js" if rng.random() < 0.7 else f"/static/js/chunk-{rng.randint(100, 999)}.{hexs(rng, 8)}.js"
            accept, dest, mode = "*/*", "script", "no-cors"
        elif r < 0.90:
            target = f"/static/css/{rng.choice(['app', 'product', 'checkout'])}.{BUILD}.css"
            accept, dest, mode = "text/css,*/*;q=0.1", "style", "no-cors"
        elif r < 0.96:
            target = f"/static/fonts/{rng.choice(['inter-var', 'inter-italic-var', 'noto-sans-jp-400'])}.woff2"
            accept, dest, mode = "*/*", "font", "cors"
        else:
            target = rng.choice(["/favicon.ico", "/apple-touch-icon.png", "/static/img/logo.svg",
                                 f"/static/img/banners/{rng.choice(['winter', 'outdoor', 'kitchen'])}-{rng.choice(['desktop', 'mobile'])}.webp"])
            accept, dest, mode = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", "image", "no-cors"
        if rng.random() < 0.2 and dest in ("script", "style"):
            target += "?v=" + rng.choice(["3.2.1", "3.2.2", BUILD])
        extra = [("Origin", f"https://{HOST}")] if mode == "cors" else []
        h = self.browser_headers(c, accept, dest, mode, "same-origin", c.page or f"https://{HOST}/", extra)
        if c.family == "chrome":
            h.append(("Priority", "u=1" if dest in ("style", "font") else "u=2" if dest == "script" else "u=5, i"))
        return "GET", target, h, None

    def api_headers(self, c, has_body=False):
        rng = self.rng
        if c.kind == "browser":
            h = [("Host", HOST), ("User-Agent", c.ua), ("Accept", "application/json, text/plain, */*")]
            if c.hints:
                h += list(c.hints.items())
            h += [("Accept-Language", c.accept_language), ("Accept-Encoding", c.accept_encoding)]
            if has_body:
                h += [("Content-Type", "application/json"), ("Origin", f"https://{HOST}"),
                      ("X-CSRF-Token", c.cookies["csrftoken"])]
            if c.bearer:
                h.append(("Authorization", "Bearer " + c.bearer))
            h += [("X-Request-ID", uuid(rng)), ("Referer", c.page or f"https://{HOST}/"),
                  ("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors"), ("Sec-Fetch-Site", "same-origin"),
                  ("Cookie", c.cookie_header(self.t))]
            return h
        h = [("Host", API_HOST), ("User-Agent", c.ua), ("Accept", "application/json"),
             ("Accept-Language", c.accept_language), ("Accept-Encoding", c.accept_encoding),
             ("Authorization", "Bearer " + c.bearer), ("X-Request-ID", uuid(rng))]
        if c.kind == "app":
            h += [("X-Device-ID", c.device), ("X-App-Platform", "ios" if "iOS" in c.ua else "android")]
        if has_body:
            h.insert(3, ("Content-Type", "application/json; charset=utf-8"))
        return h

    def api(self, c):
        rng = self.rng
        r = rng.random()
        if r < 0.25:
            params = [("q", rng.choice(SEARCHES[c.lang])), ("limit", rng.choice([12, 24, 48]))]
            if rng.random() < 0.5:
                params.append(("offset", 24 * rng.randint(1, 8)))
            if rng.random() < 0.5:
                params.append(("filter[category]", rng.choice(list(CATEGORIES))))
            if rng.random() < 0.4:
                params.append(("filter[size]", rng.choice(SIZES)))
            target = "/api/v2/search?" + q(params, plus=False)
        elif r < 0.45:
            ids = ",".join(str(rng.randint(100_000, 999_999)) for _ in range(rng.randint(2, 24)))
            target = "/api/v2/products?" + q([("ids", ids), ("fields", "id,name,price,stock,images")], plus=False)
        elif r < 0.60:
            cat = rng.choice(list(CATEGORIES))
            params = [("page", rng.randint(1, 20)), ("per_page", rng.choice([20, 50])),
                      ("sort", rng.choice(["-created_at", "price", "-price", "-rating", "name"]))]
            if rng.random() < 0.5:
                params.append(("price[gte]", rng.choice([10, 25, 50])))
                params.append(("price[lte]", rng.choice([100, 200, 500])))
            target = f"/api/v2/categories/{cat}/products?" + q(params, plus=False)
        elif r < 0.72:
            pid = rng.randint(100_000, 999_999)
            target = rng.choice([f"/api/v2/products/{pid}", f"/api/v2/products/{pid}/reviews?page={rng.randint(1, 9)}&sort=-helpful",
                                 f"/api/v2/products/{pid}/availability?store={rng.randint(1, 120)}&size={urllib.parse.quote(rng.choice(SIZES))}"])
        elif r < 0.85:
            target = rng.choice(["/api/v2/cart", "/api/v2/me", "/api/v2/me/addresses", "/api/v2/me/wishlist",
                                 f"/api/v2/orders?status=shipped&page={rng.randint(1, 4)}",
                                 f"/api/v2/orders/{rng.randint(10 ** 7, 10 ** 8)}"])
        else:
            since = self.t - rng.randint(60, 86_400)
            target = "/api/v2/" + rng.choice([
                f"orders?updated_since={since}&limit=100&cursor={b64url(bytes(rng.getrandbits(8) for _ in range(18)))}",
                f"inventory?warehouse=WH-{rng.randint(1, 9)}&skus={','.join(f'SKU-{rng.randint(10000, 99999)}' for _ in range(rng.randint(3, 15)))}",
                f"prices?currency={CURRENCY[c.lang]}&country={ADDRESSES[c.lang][2]}&ts={self.t}"])
        return "GET", target, self.api_headers(c), None

    def write(self, c, findings):
        rng = self.rng
        lang = c.lang
        r = rng.random()
        method = "POST"
        if r < 0.25:
            target = "/api/v2/cart/items"
            body = {"product_id": rng.randint(100_000, 999_999), "sku": f"SKU-{rng.randint(10000, 99999)}",
                    "size": rng.choice(SIZES), "color": rng.choice(COLORS), "quantity": rng.randint(1, 3),
                    "unit_price": round(rng.uniform(4, 260), 2), "currency": CURRENCY[lang],
                    "source": rng.choice(["pdp", "quick-view", "wishlist", "recommendations"]), "added_at": self.t,
                    "list": {"id": rng.choice(list(CATEGORIES)), "position": rng.randint(1, 48)},
                    "gift_message": rng.choice(NOTES[lang]) if rng.random() < 0.1 else None}
            if findings and rng.random() < 0.4:
                method, target, body = "PATCH", f"/api/v2/cart/items/{rng.randint(1, 10 ** 6)}", {"quantity": rng.randint(1, 4)}
        elif r < 0.45:
            target = "/api/v2/orders"
            body = self.order(c, findings)
        elif r < 0.62:
            pid = rng.randint(100_000, 999_999)
            target = f"/api/v2/products/{pid}/reviews"
            text = " ".join(rng.sample(REVIEWS[lang], rng.randint(1, min(4, len(REVIEWS[lang])))))
            body = {"rating": rng.randint(3, 5), "title": rng.choice(TITLES[lang]), "text": text,
                    "author": {"display_name": f"{c.first} {c.last[0]}.", "verified_buyer": rng.random() < 0.8},
                    "size_bought": rng.choice(SIZES), "fit": rng.choice(["small", "true_to_size", "large"]),
                    "language": lang, "photos": [], "recommend": True}
        elif r < 0.75:
            streets, cities, country, phone = ADDRESSES[lang]
            city, postal = rng.choice(cities)
            target = "/api/v2/me/addresses"
            body = {"label": rng.choice(["home", "work"]), "first_name": c.first, "last_name": c.last,
                    "street": f"{rng.randint(1, 180)} {rng.choice(streets)}" if lang in ("en", "fr") else f"{rng.choice(streets)} {rng.randint(1, 180)}",
                    "line2": rng.choice(["", f"Apt {rng.randint(1, 40)}", f"{rng.randint(1, 6)}. OG"]) if lang != "ja" else f"{rng.randint(1, 9)}-{rng.randint(1, 20)}-{rng.randint(1, 30)}",
                    "postal_code": postal, "city": city, "country": country, "phone": self.phone(phone),
                    "email": c.email, "default": rng.random() < 0.5,
                    "delivery_instructions": rng.choice(NOTES[lang]) if rng.random() < 0.3 else ""}
            if findings and rng.random() < 0.5:
                method, target = "PUT", f"/api/v2/me/addresses/{rng.randint(1, 5000)}"
        else:
            target = "/api/v2/events"
            # A field named session_id in a request without Referer is rule 943120's session
            # fixation: apps and API clients, which send no Referer, call it "session".
            session = "session_id" if c.kind == "browser" or findings else "session"
            body = {"client_id": c.cookies.get("_ga", f"app.{c.user}"), session: str(c.started),
                    "events": [self.event(c) for _ in range(rng.randint(2, 14))],
                    "user_properties": {"locale": c.accept_language.split(",")[0], "currency": CURRENCY[lang],
                                        "logged_in": c.logged_in}}
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":") if rng.random() < 0.7 else None).encode()
        return method, target, self.api_headers(c, has_body=True), data

    def phone(self, fmt):
        n = fmt.count("{")
        rng = self.rng
        if n == 1:
            width = int(fmt.split("{:0")[1][0])
            return fmt.format(rng.randint(0, 10 ** width - 1))
        return fmt.format(*(rng.randint(0, 99) if "{:02d}" in fmt else rng.randint(0, 999) if "{:03d}" in fmt
                            else rng.randint(0, 9999) for _ in range(n)))

    def order(self, c, findings):
        rng = self.rng
        lang = c.lang
        streets, cities, country, phone = ADDRESSES[lang]
        city, postal = rng.choice(cities)
        address = {"first_name": c.first, "last_name": c.last, "street": f"{rng.choice(streets)} {rng.randint(1, 120)}",
                   "postal_code": postal, "city": city, "country": country, "phone": self.phone(phone)}
        items = []
        for _ in range(rng.choices([1, 2, 3, 5, 8, 14, 25], weights=[30, 25, 18, 12, 8, 5, 2])[0]):
            cat, slug, pid = product(rng)
            price = round(rng.uniform(4, 260), 2) if CURRENCY[lang] != "JPY" else rng.randint(800, 38000)
            # The shop's SKUs: its category's code and a number (the name's first letters would
            # make "CHEF-8911", a Unix command's name and a dash: rule 932260 blocks it).
            sku = f"{slug[:4].upper()}-{rng.randint(1000, 9999)}" if findings else \
                f"{CATEGORY_CODES[cat]}-{rng.randint(1000, 9999)}-{rng.randint(10, 99)}"
            items.append({"product_id": pid, "sku": sku,
                          "name": slug.replace("-", " ").capitalize(), "size": rng.choice(SIZES),
                          "color": rng.choice(COLORS), "quantity": rng.randint(1, 3), "unit_price": price})
        total = round(sum(i["unit_price"] * i["quantity"] for i in items), 2)
        body = {"cart_id": c.cookies.get("cart_id") or uuid(rng), "currency": CURRENCY[lang],
                "customer": {"id": c.user, "email": c.email, "first_name": c.first, "last_name": c.last,
                             "phone": address["phone"], "newsletter": rng.random() < 0.3},
                "shipping_address": address, "billing_address": address if rng.random() < 0.8 else dict(
                    address, street=f"{rng.choice(streets)} {rng.randint(1, 120)}"),
                "items": items, "shipping_method": rng.choice(["standard", "express", "pickup"]),
                "payment": {"method": rng.choice(["card", "paypal", "klarna", "apple_pay"]),
                            "token": "tok_" + token(rng, 24)},
                "totals": {"subtotal": total, "shipping": rng.choice([0, 4.95, 9.9]), "tax_included": True},
                "accepts_terms": True}
        if rng.random() < 0.4:
            body["note"] = rng.choice(NOTES[lang])
        if rng.random() < 0.3:
            body["coupon"] = rng.choice(["WELCOME10", "WINTER25", "FREESHIP"])
        return body

    def event(self, c):
        rng = self.rng
        cat, slug, pid = product(rng)
        self.t += rng.randint(0, 3)
        return {"name": rng.choice(EVENTS), "ts": self.t * 1000 + rng.randint(0, 999),
                "params": {"page_location": c.page or f"https://{HOST}/", "item_id": pid,
                           "item_name": slug.replace("-", " "), "item_category": cat,
                           "value": round(rng.uniform(5, 300), 2), "engagement_time_msec": rng.randint(50, 30_000)}}


def generate(requests, clients, seed, findings=False):
    """[(id, kind, client number, raw bytes)]: `requests` distinct requests from `clients` clients."""
    rng = random.Random(seed)
    t0 = 1_796_000_000  # a fixed time (2026-12): the same corpus on every run
    shop = Shop(rng, t0)
    pool = [Client(rng, i, t0) for i in range(clients)]
    # A few clients send many requests, most a few (the activity of a shop's visitors).
    activity = [rng.paretovariate(1.2) for _ in pool]
    eligible = {k: [i for i, c in enumerate(pool) if c.kind == "browser" or k in ("api", "write")] for k in KINDS}
    weights = {k: [activity[i] * (3 if pool[i].kind != "browser" and k in ("api", "write") else 1) for i in eligible[k]]
               for k in KINDS}
    out, seen = [], set()
    kinds = list(MIX)
    while len(out) < requests:
        kind = rng.choices(kinds, weights=[MIX[k] for k in kinds])[0]
        c = pool[rng.choices(eligible[kind], weights=weights[kind])[0]]
        shop.t += rng.choice([0, 0, 0, 1])
        if kind == "write" and c.kind == "browser" and c.page is None:
            kind = "page"
        method, target, headers, body = (shop.page(c) if kind == "page" else shop.static(c) if kind == "static" else
                                         shop.api(c) if kind == "api" else shop.write(c, findings))
        raw = raw_request(method, target, headers, body)
        h = hashlib.sha256(raw).digest()
        if h in seen:  # a reload of the same page with the same cookies: not a new request
            continue
        seen.add(h)
        out.append((f"{kind}/{len(out):06d}", kind, c.n, raw))
    return out


def write(out_dir, reqs, meta):
    os.makedirs(out_dir, exist_ok=True)
    files = {k: open(os.path.join(out_dir, f"requests-{k}.raw.tmp"), "wb") for k in KINDS}
    files[None] = open(os.path.join(out_dir, "requests.raw.tmp"), "wb")
    with open(os.path.join(out_dir, "requests.jsonl.tmp"), "w") as jl:
        for rid, kind, client, raw in reqs:
            rec = f"{len(raw)} {rid}\n".encode() + raw
            files[None].write(rec)
            files[kind].write(rec)
            jl.write(json.dumps({"id": rid, "kind": kind, "client": client, "raw": base64.b64encode(raw).decode()}) + "\n")
    for f in files.values():
        f.close()
    for name in [f"requests-{k}.raw" for k in KINDS] + ["requests.raw", "requests.jsonl"]:
        os.replace(os.path.join(out_dir, name + ".tmp"), os.path.join(out_dir, name))
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def describe(reqs, clients):
    sizes = sorted(len(r) for _, _, _, r in reqs)
    by_kind = collections.Counter(k for _, k, _, _ in reqs)
    methods = collections.Counter(r.split(b" ", 1)[0].decode() for _, _, _, r in reqs)
    bodies = sorted(len(r) - r.index(b"\r\n\r\n") - 4 for _, k, _, r in reqs if k == "write")
    return {"requests": len(reqs), "clients": clients, "clients_seen": len({c for _, _, c, _ in reqs}),
            "by_kind": {k: by_kind[k] for k in KINDS}, "methods": dict(methods),
            "bytes": sum(sizes), "median_bytes": sizes[len(sizes) // 2] if sizes else 0,
            "write_body_bytes": {"min": bodies[0], "median": bodies[len(bodies) // 2], "max": bodies[-1]} if bodies else None}


def options_key(a):
    src = hashlib.sha256(open(os.path.abspath(__file__), "rb").read()).hexdigest()[:16]
    return {"requests": a.requests, "clients": a.clients, "seed": a.seed, "findings": a.findings, "generator": src}


def ensure(out_dir, requests=20_000, clients=400, seed=1, findings=False):
    """The corpus in out_dir, written when missing or made with other options or another generator;
    returns its meta.json."""
    a = argparse.Namespace(requests=requests, clients=clients, seed=seed, findings=findings)
    key = options_key(a)
    try:
        meta = json.load(open(os.path.join(out_dir, "meta.json")))
        if meta.get("options") == key and all(os.path.exists(os.path.join(out_dir, f)) for f in
                                             ["requests.raw", "requests.jsonl"] + [f"requests-{k}.raw" for k in KINDS]):
            return meta
    except (OSError, ValueError):
        pass
    reqs = generate(requests, clients, seed, findings)
    meta = {"options": key, **describe(reqs, clients)}
    write(out_dir, reqs, meta)
    return meta


# -- the check ----------------------------------------------------------------------------------

def crs_pl1_config():
    """The plugin configuration `make bench` calls "CRS PL1" (bench/run.py's CRS_PL1)."""
    sys.path.insert(0, HERE)
    from run import CRS_PL1, wafer_config
    return wafer_config(CRS_PL1)


def verdicts(cmd, jsonl, env=None):
    with open(jsonl, "rb") as f:
        p = subprocess.run(cmd, stdin=f, capture_output=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-1500:]}")
    return [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]


def summarize(engine, results, kinds):
    """Prints the blocked requests and the rules matched; returns the ids of those blocked: answered
    other than 200, or with the CRS's anomaly-score verdict logged (949110 inbound, 959100
    outbound; they log only when the score reaches the threshold). The verdict rule is counted
    because modsec_ids.py loads `@recommended-conf` (SecRuleEngine DetectionOnly) in a load of its
    own, and libmodsecurity keeps the first load's SecRuleEngine: its statuses stay 200 there."""
    blocked = [r for r in results if r.get("status") not in (200, None) or {949110, 959100} & set(r.get("ids") or [])]
    matched = collections.Counter()
    per_kind = collections.Counter()
    for r in results:
        for i in r.get("ids") or []:
            matched[i] += 1
        if r.get("ids"):
            per_kind[kinds.get(r["id"], "?")] += 1
    print(f"{engine}: {len(results)} requests, {len(blocked)} blocked, {sum(1 for r in results if r.get('ids'))} "
          f"with a rule matched ({dict(per_kind) or 'none'})")
    for rid, n in matched.most_common(20):
        print(f"  rule {rid}: {n} requests")
    for r in blocked[:10]:
        print(f"  blocked: {r['id']} status {r['status']} rules {r.get('ids')}")
    return {r["id"] for r in blocked}


def properties(records, meta):
    """What the corpus must be (bench/README.md): the problems found, [] when none."""
    problems = []
    raws = [base64.b64decode(r["raw"]) for r in records]
    if len(set(raws)) != len(raws):
        problems.append(f"{len(raws) - len(set(raws))} requests repeat another")
    if len(raws) >= 10_000 and meta["clients_seen"] < 200:
        problems.append(f"only {meta['clients_seen']} clients")
    no_host = [r["id"] for r, raw in zip(records, raws) if b"\r\nHost: " not in raw.split(b"\r\n\r\n", 1)[0]]
    if no_host:
        problems.append(f"{len(no_host)} requests without Host, e.g. {no_host[:3]}")
    for k, share in MIX.items():
        got = 100 * meta["by_kind"][k] / max(1, len(raws))
        if len(raws) >= 1000 and abs(got - share) > 5:
            problems.append(f"{k}: {got:.1f}% of the requests, not ~{share}%")
    body = meta.get("write_body_bytes") or {}
    if body and not (200 <= body["min"] and body["max"] <= 6200):
        problems.append(f"JSON bodies of {body['min']}-{body['max']} bytes, not 0.2-6 KB")
    return problems


def check(a):
    meta = ensure(a.out, a.requests, a.clients, a.seed, a.findings)
    jsonl = os.path.join(a.out, "requests.jsonl")
    kinds = {}
    records = []
    with open(jsonl) as f:
        for line in f:
            r = json.loads(line)
            kinds[r["id"]] = r["kind"]
            records.append(r)
    problems = [] if a.findings else properties(records, meta)  # --findings: PATCH bodies are smaller
    for p in problems:
        print(f"corpus: {p}")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as cf:
        json.dump(crs_pl1_config(), cf)
    try:
        blocked = set()
        print(f"corpus {jsonl}: {meta['requests']} requests from {meta['clients_seen']} clients, {meta['by_kind']}")
        got = verdicts([a.wafer, "ids", cf.name], jsonl)
        if len(got) != meta["requests"]:
            sys.exit(f"wafer ids answered {len(got)} of {meta['requests']} requests")
        blocked |= summarize("wafer (native, CRS PL1 blocking)", got, kinds)
        if a.modsec:
            py = os.path.join(REPO, ".venv-oracle", "bin", "python")
            if not os.access(py, os.X_OK):
                sys.exit(f"{py} missing: run `make oracle` once (it makes the venv with libmodsecurity)")
            env = dict(os.environ, CRS_DIR=a.crs)
            got = verdicts([py, os.path.join(REPO, "tests", "oracle", "modsec_ids.py"), cf.name, "--crs", a.crs], jsonl, env)
            blocked |= summarize("ModSecurity 3.0.15 (libmodsecurity, CRS PL1 blocking)", got, kinds)
        # A request fails when an engine blocks it; a property the corpus lacks is one failure more.
        bad = len(blocked) + len(problems)
        print(f"{meta['requests'] - len(blocked)} passed, {bad} failed")
        return 1 if bad else 0
    finally:
        os.unlink(cf.name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", choices=["write", "check"], default="write")
    ap.add_argument("--out", default=os.path.join(REPO, "target", "realistic"))
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--clients", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--findings", action="store_true", help="also what CRS PL1 blocks (PUT, PATCH, SKUs like CHEF-8911, session_id without Referer)")
    ap.add_argument("--ensure", action="store_true", help="write only when missing or made with other options")
    ap.add_argument("--wafer", default=os.path.join(REPO, "target", "release", "wafer"), help="check: the wafer CLI")
    ap.add_argument("--modsec", action="store_true", help="check: also through libmodsecurity (tests/oracle)")
    ap.add_argument("--crs", default=os.environ.get("CRS_DIR", os.path.join(REPO, "..", "shared", "coreruleset")))
    a = ap.parse_args()
    if a.requests < 1 or a.clients < 1:
        sys.exit("--requests and --clients must be at least 1")
    if a.command == "check":
        return check(a)
    if a.ensure:
        meta = ensure(a.out, a.requests, a.clients, a.seed, a.findings)
    else:
        reqs = generate(a.requests, a.clients, a.seed, a.findings)
        meta = {"options": options_key(a), **describe(reqs, a.clients)}
        write(a.out, reqs, meta)
    print(f"{a.out}: {meta['requests']} requests from {meta['clients_seen']} clients, by kind {meta['by_kind']}, "
          f"methods {meta['methods']}, median {meta['median_bytes']} bytes, writes' bodies {meta['write_body_bytes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
