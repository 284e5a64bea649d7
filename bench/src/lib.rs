//! benchmarks (see issue 4).
