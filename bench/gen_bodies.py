#!/usr/bin/env python3
"""Writes the benign JSON request bodies of `make bench` (deterministic; stdlib only).

  python3 bench/gen_bodies.py            # -> bench/data/body-10k.json, bench/data/body-50k.json

The bodies are what a shop's API might receive: a larger order (10 KB) and a batch of catalog
products with descriptions and customer reviews (50 KB). They use ordinary words, numbers,
e-mail addresses, ISO dates and a few punctuation marks, and stay far below
SecArgumentsLimit (1000 arguments). They must pass CRS PL1 and PL2 without any rule
interruption on wafer and on ModSecurity: `make bench` checks that every response is the
upstream's 200 (and wafer's interruption counter) before it measures.
"""
import json, os, random, sys

HERE = os.path.dirname(os.path.abspath(__file__))

ADJ = ["lightweight", "durable", "breathable", "waterproof", "comfortable", "classic", "compact", "soft",
       "sturdy", "reflective", "recycled", "warm", "flexible", "padded", "slim", "roomy", "quiet", "bright"]
NOUN = ["jacket", "backpack", "running shoe", "water bottle", "headlamp", "rain cover", "sleeping bag",
        "hiking pole", "fleece", "beanie", "glove", "tent", "camping stove", "map case", "sock", "cap"]
COLOR = ["blue", "black", "green", "grey", "red", "yellow", "white", "navy", "olive", "orange"]
PHRASES = [
    "Made for long days on the trail and easy to pack away",
    "The fabric dries quickly after a rain shower",
    "Fits well with a thin base layer underneath",
    "Tested by our team on several mountain tours last summer",
    "Machine washable at thirty degrees with similar colours",
    "Comes with a small bag for storage and travel",
    "The zipper runs smoothly even with cold fingers",
    "A good choice for beginners and experienced hikers alike",
    "Keeps its shape after many months of daily use",
    "The straps can be adjusted with one hand while walking",
    "Recommended for spring and autumn weather in the hills",
    "Our customers often buy it together with matching socks",
]
REVIEW = [
    "Great quality for the price and delivery was fast",
    "Very happy with it so far and would buy again",
    "Runs a little small so consider one size up",
    "Lovely colour and the material feels solid",
    "Used it on a weekend trip and it worked perfectly",
    "Good product but the box was slightly damaged",
    "My daughter loves it and wears it every day",
    "Exactly as described on the website",
]
FIRST = ["Anna", "Lukas", "Sofia", "Jonas", "Emma", "Felix", "Mia", "Paul", "Lena", "David", "Clara", "Max"]
LAST = ["Weber", "Fischer", "Wagner", "Becker", "Hoffmann", "Koch", "Richter", "Klein", "Wolf", "Neumann"]
CITY = [("Berlin", "10115"), ("Hamburg", "20095"), ("Munich", "80331"), ("Cologne", "50667"),
        ("Leipzig", "04109"), ("Dresden", "01067"), ("Bremen", "28195"), ("Hanover", "30159")]


def sentence(rng, pool, n):
    return ". ".join(rng.sample(pool, n)) + "."


def person(rng, i):
    f, l = rng.choice(FIRST), rng.choice(LAST)
    city, plz = rng.choice(CITY)
    return {"id": 40000 + i, "first_name": f, "last_name": l,
            "email": f"{f.lower()}.{l.lower()}{i}@example.com", "phone": f"+49 30 {rng.randint(1000000, 9999999)}",
            "address": {"street": f"Lindenallee {rng.randint(1, 120)}", "city": city, "postal_code": plz,
                        "country": "DE"}}


def item(rng, i):
    adj, noun = rng.choice(ADJ), rng.choice(NOUN)
    return {"sku": f"SKU{rng.randint(100000, 999999)}", "name": f"{adj.capitalize()} {noun}",
            "size": rng.choice(["S", "M", "L", "XL", "42", "43", "750ml", "one size"]),
            "color": rng.choice(COLOR), "quantity": rng.randint(1, 4),
            "unit_price": round(rng.uniform(5, 250), 2), "gift_wrap": rng.random() < 0.2}


def order(rng, target):
    """A large order: customer, many line items, shipping and payment, notes."""
    doc = {"order_id": "ORD2024558213", "created_at": "2024-05-14T09:31:22Z", "customer": person(rng, 1),
           "items": [], "shipping": {"method": "standard", "carrier": "DHL", "estimated_days": 3},
           "payment": {"method": "card", "card_last4": "4242", "currency": "EUR"},
           "coupon": "SPRING10", "notes": "Please leave the parcel with the neighbour on the second floor",
           "client": {"locale": "de-DE", "timezone": "Europe/Berlin", "app_version": "5.12.3"}}
    i = 0
    while len(json.dumps(doc)) < target - 200:
        doc["items"].append(item(rng, i)); i += 1
    return doc


def product(rng, i):
    adj, noun = rng.choice(ADJ), rng.choice(NOUN)
    return {"product_id": 700000 + i, "title": f"{adj.capitalize()} {noun} in {rng.choice(COLOR)}",
            "description": sentence(rng, PHRASES, 6), "price": round(rng.uniform(5, 250), 2),
            "stock": rng.randint(0, 500), "tags": rng.sample(ADJ, 2),
            "reviews": [{"author": f"{rng.choice(FIRST)} {rng.choice(LAST)[0]}", "rating": rng.randint(3, 5),
                         "text": sentence(rng, REVIEW, 3)}]}


def catalog(rng, target):
    """A batch of catalog products, as a shop back office might upload them."""
    doc = {"batch_id": "CAT2024Q2", "source": "back office import", "language": "en",
           "uploaded_by": person(rng, 7), "products": []}
    i = 0
    while len(json.dumps(doc)) < target - 400:
        doc["products"].append(product(rng, i)); i += 1
    return doc


def args_count(v):
    if isinstance(v, dict):
        return sum(args_count(x) for x in v.values())
    if isinstance(v, list):
        return sum(args_count(x) for x in v)
    return 1


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "data")
    os.makedirs(out, exist_ok=True)
    for name, make, target in [("body-10k.json", order, 10 * 1024), ("body-50k.json", catalog, 50 * 1024)]:
        doc = make(random.Random(name), target)
        text = json.dumps(doc)
        assert args_count(doc) < 1000, (name, args_count(doc))
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
        print(f"{name}: {len(text)} bytes, {args_count(doc)} JSON values")


if __name__ == "__main__":
    main()
