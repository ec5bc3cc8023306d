//! A reader for the Prometheus text exposition format (version 0.0.4), enough for the metrics the
//! SPEs' drivers read: `name{label="value",...} number [timestamp]` lines, `#` comments.

use std::collections::BTreeMap;

/// One sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Labels, sorted by name.
    pub labels: BTreeMap<String, String>,
    /// The value (`NaN`, `+Inf`, `-Inf` allowed).
    pub value: f64,
}

impl Sample {
    /// A label's value, or "" if absent.
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map(String::as_str).unwrap_or("")
    }
}

/// One sample as [`scan`] sees it: borrowed from the text, its labels not taken apart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RawSample<'a> {
    /// Metric name.
    pub name: &'a str,
    /// The text between the braces (`query="q",id="3"`), empty without labels.
    pub labels: &'a str,
    /// The value.
    pub value: f64,
}

impl<'a> RawSample<'a> {
    /// Every label, in the order written, each value unescaped only when it holds an escape: one
    /// pass where [`RawSample::label`] looks for one key from the start. Stops at a malformed
    /// label (which [`scan`] has already refused).
    pub fn labels(&self) -> impl Iterator<Item = (&'a str, std::borrow::Cow<'a, str>)> {
        let mut rest = self.labels;
        std::iter::from_fn(move || {
            rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            let eq = rest.find('=')?;
            let name = rest[..eq].trim();
            let body = rest[eq + 1..].trim_start().strip_prefix('"')?;
            let end = closing_quote(body)?;
            let raw = &body[..end];
            rest = &body[end + 1..];
            Some((name, if raw.contains('\\') { unescape(raw).into() } else { raw.into() }))
        })
    }

    /// The value of label `key`, unescaped only when it holds an escape; `None` if absent.
    pub fn label(&self, key: &str) -> Option<std::borrow::Cow<'a, str>> {
        let mut rest = self.labels;
        loop {
            rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            let eq = rest.find('=')?;
            let name = rest[..eq].trim();
            let body = rest[eq + 1..].trim_start().strip_prefix('"')?;
            let end = closing_quote(body)?;
            if name == key {
                let raw = &body[..end];
                return Some(if raw.contains('\\') { unescape(raw).into() } else { raw.into() });
            }
            rest = &body[end + 1..];
        }
    }
}

/// The index of the quote that ends a label value starting at `body` (escapes skipped).
fn closing_quote(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some(c) => out.push(c),
                None => {}
            },
            (c, false) => out.push(c),
        }
    }
    out
}

/// Calls `each` with every sample of an exposition whose name `wanted` accepts, without
/// allocating: the fast path of a driver that reads a few metrics of a large exposition (an
/// engine's `/metrics` with 100 operators is ~100 KB, 1 100 samples). Lines of other names are
/// only checked for their shape. A malformed line is an error naming its number and content, as
/// with [`parse`].
pub fn scan<'a>(
    text: &'a str,
    wanted: impl Fn(&str) -> bool,
    mut each: impl FnMut(RawSample<'a>),
) -> Result<(), String> {
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |e: &str| format!("line {}: {e}: {line:?}", n + 1);
        let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).ok_or_else(|| bad("no value"))?;
        let name = &line[..name_end];
        if name.is_empty() {
            return Err(bad("no metric name"));
        }
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(body) => {
                let end = labels_end(body).ok_or_else(|| bad("unterminated labels"))?;
                (&body[..end], &body[end + 1..])
            }
            None => ("", &line[name_end..]),
        };
        if !wanted(name) {
            continue;
        }
        let value = parse_value(rest).map_err(|e| bad(&e))?;
        each(RawSample { name, labels, value });
    }
    Ok(())
}

/// The index of the `}` that closes a label set (quotes and escapes skipped).
fn labels_end(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i += closing_quote(&body[i + 1..])? + 2,
            b'}' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn parse_value(rest: &str) -> Result<f64, String> {
    match rest.split_whitespace().next().ok_or("no value")? {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        v => v.parse().map_err(|_| format!("value {v:?} is not a number")),
    }
}

/// Parses an exposition; a malformed line is an error naming its number and content.
pub fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        samples.push(parse_line(line).map_err(|e| format!("line {}: {e}: {line:?}", n + 1))?);
    }
    Ok(samples)
}

fn parse_line(line: &str) -> Result<Sample, String> {
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).ok_or("no value")?;
    let name = line[..name_end].to_string();
    if name.is_empty() {
        return Err("no metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        loop {
            // Skip separators.
            while let Some((_, c)) = chars.peek() {
                if *c == ',' || c.is_whitespace() {
                    chars.next();
                } else {
                    break;
                }
            }
            let Some(&(start, c)) = chars.peek() else { return Err("unterminated labels".into()) };
            if c == '}' {
                rest = &body[start + 1..];
                break;
            }
            let eq = body[start..].find('=').ok_or("label without '='")? + start;
            let key = body[start..eq].trim().to_string();
            while chars.peek().is_some_and(|&(i, _)| i <= eq) {
                chars.next();
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err(format!("label {key}: value must be quoted"));
            }
            let mut value = String::new();
            loop {
                match chars.next() {
                    None => return Err(format!("label {key}: unterminated value")),
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c)) => value.push(c),
                        None => return Err(format!("label {key}: dangling escape")),
                    },
                    Some((_, c)) => value.push(c),
                }
            }
            labels.insert(key, value);
        }
    }
    let value = parse_value(rest)?;
    Ok(Sample { name, labels, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_samples_labels_and_escapes() {
        let text = "# HELP x y\n# TYPE x counter\nx{query=\"q\",operator=\"a -> b (1/2)\",id=\"3\"} 42\n\
                    y 1.5e3 1700000000\nz{l=\"quote \\\" back \\\\ nl \\n\",} +Inf\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].name, "x");
        assert_eq!(s[0].label("operator"), "a -> b (1/2)");
        assert_eq!(s[0].value, 42.0);
        assert_eq!(s[1].value, 1500.0);
        assert_eq!(s[2].label("l"), "quote \" back \\ nl \n");
        assert!(s[2].value.is_infinite());
    }

    #[test]
    fn a_scan_reads_what_parse_reads() {
        let text = "# HELP x y\n# TYPE x counter\nx{query=\"q\",operator=\"a -> b {1/2}\",id=\"3\"} 42\n\
                    y 1.5e3 1700000000\nz{l=\"quote \\\" back \\\\ nl \\n }\",} +Inf\n";
        let parsed = parse(text).unwrap();
        let mut scanned = Vec::new();
        scan(text, |_| true, |s| scanned.push(s)).unwrap();
        assert_eq!(scanned.len(), parsed.len());
        for (s, p) in scanned.iter().zip(&parsed) {
            assert_eq!(s.name, p.name);
            assert_eq!(s.value.is_infinite(), p.value.is_infinite());
            for (k, v) in &p.labels {
                assert_eq!(s.label(k).as_deref(), Some(v.as_str()), "{k}");
            }
        }
        assert_eq!(scanned[0].label("id").as_deref(), Some("3"));
        let all: Vec<(&str, String)> = scanned[2].labels().map(|(k, v)| (k, v.into_owned())).collect();
        assert_eq!(all, [("l", parsed[2].label("l").to_string())]);
        assert_eq!(scanned[0].labels().map(|(k, _)| k).collect::<Vec<_>>(), ["query", "operator", "id"]);
        assert_eq!(scanned[0].label("tid"), None);
        assert_eq!(scanned[1].labels, "");
        // Only wanted names are handed over; the others are still checked.
        let mut names = Vec::new();
        scan(text, |n| n == "y", |s| names.push(s.name)).unwrap();
        assert_eq!(names, ["y"]);
        let e = scan("ok 1\nbad{a=\"1\" 2\n", |_| false, |_| ()).unwrap_err();
        assert!(e.starts_with("line 2:") && e.contains("unterminated labels"), "{e}");
        assert!(scan("x abc", |_| true, |_| ()).unwrap_err().contains("not a number"));
    }

    #[test]
    fn malformed_lines_are_named() {
        let e = parse("ok 1\nbad{a=\"1\" 2\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        assert!(parse("x{a=1} 2").is_err());
        assert!(parse("x abc").unwrap_err().contains("not a number"));
    }
}
