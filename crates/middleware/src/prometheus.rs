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
    let value_text = rest.split_whitespace().next().ok_or("no value")?;
    let value = match value_text {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().map_err(|_| format!("value {v:?} is not a number"))?,
    };
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
    fn malformed_lines_are_named() {
        let e = parse("ok 1\nbad{a=\"1\" 2\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        assert!(parse("x{a=1} 2").is_err());
        assert!(parse("x abc").unwrap_err().contains("not a number"));
    }
}
