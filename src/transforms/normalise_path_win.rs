//! `t:normalisePathWin` (alias `normalizePathWin`): like `normalisePath`
//! after converting every backslash to a forward slash.

use super::normalise_path::normalize;
use std::borrow::Cow;

pub fn normalise_path_win(input: &[u8]) -> Cow<'_, [u8]> {
    normalize(input, true)
}
