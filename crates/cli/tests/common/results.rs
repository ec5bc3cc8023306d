//! Reading what `moirai bench` and `moirai demo` wrote: `results.json` and its numbers.

use std::path::Path;

/// `results.json` (or any JSON file), parsed; panics, naming it, when it is missing or not JSON.
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("results.json exists")).expect("results.json is JSON")
}

/// A finite number, or a panic naming `what`.
pub fn num(v: &serde_json::Value, what: &str) -> f64 {
    let x = v.as_f64().unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x.is_finite(), "{what} = {x}");
    x
}
