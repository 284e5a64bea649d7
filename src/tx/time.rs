//! TIME* variables, computed only when a rule reads them (UTC; the clock is the caller's:
//! [`crate::Transaction::set_time_ms`]).

use crate::vars::Var;

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
pub(crate) fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The value of `var` at `now_ms` (milliseconds since the Unix epoch).
pub(crate) fn value(var: Var, now_ms: u64) -> String {
    let secs = i64::try_from(now_ms / 1000).unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    let (hh, mm, ss) = (sod / 3600, (sod / 60) % 60, sod % 60);
    match var {
        Var::TimeEpoch => secs.to_string(),
        Var::TimeYear => y.to_string(),
        Var::TimeMon => format!("{m:02}"),
        Var::TimeDay => format!("{d:02}"),
        Var::TimeHour => format!("{hh:02}"),
        Var::TimeMin => format!("{mm:02}"),
        Var::TimeSec => format!("{ss:02}"),
        Var::TimeWday => ((days + 4).rem_euclid(7)).to_string(),
        _ => format!("{y}{m:02}{d:02}{hh:02}{mm:02}{ss:02}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil(0), (1970, 1, 1));
        assert_eq!(super::civil(20_786), (2026, 11, 29));
    }
}
