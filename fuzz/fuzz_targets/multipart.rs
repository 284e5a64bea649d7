//! multipart/form-data bodies. The input's first line is the Content-Type header value (a
//! fixed boundary when the line holds no `boundary=`), the rest is the body.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wafer::body::multipart::{parse, MultipartOptions};

fuzz_target!(|data: &[u8]| {
    let (ct, body) = match data.iter().position(|&b| b == b'\n') {
        Some(p) if data[..p].windows(9).any(|w| w.eq_ignore_ascii_case(b"boundary=")) => {
            (&data[..p], &data[p + 1..])
        }
        _ => (&b"multipart/form-data; boundary=xYzZy"[..], data),
    };
    let opts = MultipartOptions {
        max_files: 3,
        keep_file_content: data.len() % 2 == 0,
        max_parts: 4 + data.len() % 64,
    };
    let r = parse(ct, body, &opts);
    assert!(r.fields.len() + r.files.len() <= opts.max_parts);
    let fields: usize = r.fields.iter().map(|(n, v)| n.len() + v.len()).sum();
    assert!(fields <= body.len());
});
