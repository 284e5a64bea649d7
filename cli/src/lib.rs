//! Library side of the `wafer` command: the CRS regression runner (go-ftw
//! compatible) and its helpers, shared with the end-to-end tests.
pub mod crs;
