//! `t:normalisePath` (alias `normalizePath`): collapses repeated slashes and
//! resolves `.` and `..` segments, following libmodsecurity's
//! `normalize_path_inplace`:
//!
//! * `..` that would climb above the start of a relative path is kept
//!   (`../a` stays, `a/../../b` -> `../b`); above the root of an absolute
//!   path it is dropped (`/../etc` -> `/etc`);
//! * a leading `./` of a relative path is dropped; a trailing slash is kept
//!   only if the input had one.
//!
//! The Windows variant (`normalisePathWin`) first turns `\` into `/`.

use std::borrow::Cow;

pub fn normalise_path(input: &[u8]) -> Cow<'_, [u8]> {
    normalize(input, false)
}

/// Shared implementation for both variants.
pub(crate) fn normalize(input: &[u8], win: bool) -> Cow<'_, [u8]> {
    // Fast path: the algorithm below changes a path only at "//", at a '.' followed by '/'
    // or ending the input (and, on Windows, at '\\'); without them nothing changes
    // (`fast_path_is_exact` checks every short path over the bytes that matter).
    let has_backslash = win && input.contains(&b'\\');
    if !has_backslash && !input.ends_with(b".") && !input.windows(2).any(|w| w == b"//" || w == b"./") {
        return Cow::Borrowed(input);
    }
    let mut buf: Vec<u8> = if win {
        input
            .iter()
            .map(|&b| if b == b'\\' { b'/' } else { b })
            .collect()
    } else {
        input.to_vec()
    };
    let len = normalize_in_place(&mut buf);
    buf.truncate(len);
    if buf == input {
        Cow::Borrowed(input)
    } else {
        Cow::Owned(buf)
    }
}

/// Port of the in-place algorithm over indices (`src` reads ahead of `dst`,
/// which writes into the same buffer). Returns the new length.
fn normalize_in_place(buf: &mut [u8]) -> usize {
    let Some(end) = buf.len().checked_sub(1) else {
        return 0;
    };
    let at = |buf: &[u8], k: usize| buf.get(k).copied().unwrap_or(0);
    let relative = at(buf, 0) != b'/';
    let trailing = at(buf, end) == b'/';
    let mut src = 0usize;
    let mut dst = 0usize;
    let mut hitroot = false;
    let mut done = false;

    while !done && src <= end && dst <= end {
        // Decide whether this position ends a path segment.
        let mut skip_copy = false;
        let mut normalise = true;
        if src == end {
            done = true;
        } else if at(buf, src + 1) != b'/' {
            normalise = false;
        }

        if normalise {
            let cur = at(buf, src);
            if src != end && cur == b'/' {
                // Empty segment: the copy below collapses the slashes.
            } else if cur == b'.' {
                if dst > 0 && at(buf, dst - 1) == b'.' {
                    // Back-reference "..".
                    if relative && (hitroot || dst <= 2) {
                        hitroot = true;
                    } else {
                        // Remove ".." and the previous segment.
                        let mut d = dst as isize - 3;
                        while d > 0 && at(buf, d as usize) != b'/' {
                            d -= 1;
                        }
                        if d <= 0 {
                            hitroot = true;
                            dst = 0;
                            if !relative && src == end {
                                dst = 1;
                            }
                        } else {
                            dst = d as usize;
                        }
                        if done {
                            skip_copy = true;
                        } else {
                            src += 1;
                        }
                    }
                } else if dst == 0 {
                    // Relative self-reference "./" at the start.
                    if done {
                        skip_copy = true;
                    } else {
                        src += 1;
                    }
                } else if at(buf, dst - 1) == b'/' {
                    // Self-reference "/./".
                    if done {
                        skip_copy = true;
                    } else {
                        dst -= 1;
                        src += 1;
                    }
                }
            } else if dst > 0 {
                // A regular path segment.
                hitroot = false;
            }
        }

        if skip_copy {
            continue;
        }

        // Copy the byte if required.
        if at(buf, src) == b'/' {
            // Skip to the last of several consecutive slashes.
            while src < end && at(buf, src + 1) == b'/' {
                src += 1;
            }
            // A relative path never starts with a slash.
            if relative && dst == 0 {
                src += 1;
                continue;
            }
        }
        let byte = at(buf, src);
        if let Some(slot) = buf.get_mut(dst) {
            *slot = byte;
        }
        dst += 1;
        src += 1;
    }

    // No trailing slash unless the input had one.
    if !trailing && dst > 0 && at(buf, dst - 1) == b'/' {
        dst -= 1;
    }
    dst
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;

    /// The slow path (copy + in-place algorithm), as if no fast path existed.
    fn slow(input: &[u8], win: bool) -> Vec<u8> {
        let mut buf: Vec<u8> = input.iter().map(|&b| if win && b == b'\\' { b'/' } else { b }).collect();
        let len = normalize_in_place(&mut buf);
        buf.truncate(len);
        buf
    }

    /// Every path up to 9 bytes over `a . /` (and up to 7 with `\` for the Windows variant)
    /// gives the same result with and without the fast path.
    #[test]
    fn fast_path_is_exact() {
        for (alphabet, max, win) in [(&b"a./"[..], 9, false), (&b"a./\\"[..], 7, true)] {
            let mut count = 0;
            for len in 0..=max {
                let total = alphabet.len().pow(len as u32);
                for mut n in 0..total {
                    let mut p = Vec::with_capacity(len);
                    for _ in 0..len {
                        p.push(alphabet[n % alphabet.len()]);
                        n /= alphabet.len();
                    }
                    assert_eq!(normalize(&p, win).as_ref(), slow(&p, win).as_slice(), "{:?} win={win}", String::from_utf8_lossy(&p));
                    count += 1;
                }
            }
            assert!(count > 15_000);
        }
    }
}
