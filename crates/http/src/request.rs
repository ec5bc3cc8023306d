//! Request heads in, responses out: the pure part of the server.

/// A request as the handler sees it.
#[derive(Debug)]
pub struct Request<'a> {
    /// `GET`, `HEAD`, ... (the server answers `HEAD` with the head of the `GET` response).
    pub method: &'a str,
    /// The request target as sent, e.g. `/metrics?x=1`.
    pub target: &'a str,
    /// `HTTP/1.1`, `HTTP/1.0`.
    pub version: &'a str,
    head: &'a str,
}

impl<'a> Request<'a> {
    /// Parses a request head (up to and including its blank line).
    pub fn parse(head: &'a str) -> Request<'a> {
        let line = head.lines().next().unwrap_or("");
        let mut parts = line.split_whitespace();
        let (method, target, version) =
            (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        Request { method, target, version, head }
    }

    /// The path: the target without its query.
    pub fn path(&self) -> &'a str {
        self.target.split('?').next().unwrap_or("")
    }

    /// A header's value (the first, trimmed), by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// Whether the connection stays open after the response: HTTP/1.1 without `Connection: close`.
    pub fn keep_alive(&self) -> bool {
        self.version == "HTTP/1.1" && !self.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A response: status, content type, body, and any further headers.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
    /// Further headers, in order.
    pub headers: Vec<(String, String)>,
}

impl Response {
    /// A response with no further headers.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response { status, content_type: content_type.to_string(), body: body.into(), headers: Vec::new() }
    }

    /// A `text/plain` response.
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response::new(status, "text/plain; charset=utf-8", body.into())
    }

    /// The same with one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Head and body as one buffer, for one write; `body` false for a `HEAD` request (the head
    /// still says the length the body would have).
    pub fn encode(&self, keep_alive: bool, body: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len(),
            if keep_alive { "keep-alive" } else { "close" }
        );
        for (k, v) in &self.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        let mut out = out.into_bytes();
        if body {
            out.extend_from_slice(&self.body);
        }
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// The end of a request head (after its blank line), if it arrived.
pub(crate) fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_gives_method_path_headers_and_keep_alive() {
        let head = "GET /api/state?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9466\r\nconnection: Close\r\n\r\n";
        let r = Request::parse(head);
        assert_eq!((r.method, r.target, r.path(), r.version), ("GET", "/api/state?x=1", "/api/state", "HTTP/1.1"));
        assert_eq!(r.header("HOST"), Some("127.0.0.1:9466"));
        assert_eq!(r.header("x-none"), None);
        assert!(!r.keep_alive());
        assert!(Request::parse("GET / HTTP/1.1\r\n\r\n").keep_alive());
        assert!(!Request::parse("GET / HTTP/1.0\r\n\r\n").keep_alive());
        let garbage = Request::parse("\r\n\r\n");
        assert_eq!((garbage.method, garbage.path()), ("", ""));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn a_response_is_one_buffer_and_head_leaves_the_body_out() {
        let r = Response::text(200, "hi\n").with_header("Cache-Control", "no-store");
        let full = String::from_utf8(r.encode(true, true)).unwrap();
        assert_eq!(
            full,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n\
             Connection: keep-alive\r\nCache-Control: no-store\r\n\r\nhi\n"
        );
        let head = String::from_utf8(r.encode(false, false)).unwrap();
        assert!(head.ends_with("Connection: close\r\nCache-Control: no-store\r\n\r\n") && head.contains("Length: 3"));
    }
}
