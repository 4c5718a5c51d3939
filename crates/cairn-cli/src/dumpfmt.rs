//! The text format of LMDB's `mdb_dump` / `mdb_load` (itself Berkeley DB's `db_dump` format):
//! a header block per database, then alternating key and value lines, then `DATA=END`.
//!
//! ```text
//! VERSION=3
//! format=bytevalue          (or print)
//! database=NAME             (named databases only)
//! type=btree
//! mapsize=N
//! maxreaders=N
//! duplicates=1              (dupsort databases: Berkeley DB's spelling, ignored on load)
//! dupsort=1                 (one line per flag, in the order of FLAG_NAMES)
//! db_pagesize=N
//! HEADER=END
//!  6b6579                   (every data line starts with one space)
//!  76616c7565
//! DATA=END
//! ```
//!
//! Invariants of this module:
//! - What [`write_item`] writes, [`Reader`] reads back byte for byte, in both forms.
//! - Every parse error carries the 1-based line number where the input went wrong; the
//!   reader never guesses past an error (no resynchronisation).
//! - A backslash is written as `\5c` in print form. Readers take `\\` too, but LMDB 0.9's
//!   `mdb_load` decodes `\\` wrongly once an earlier escape on the line has shortened it (it
//!   skips the output byte instead of writing a backslash), while every loader reads `\5c`.

use std::io::{self, BufRead, Write};

/// LMDB's database flags in the order `mdb_dump` writes them, with their bits.
pub const FLAG_NAMES: [(&str, u32); 6] = [
    ("reversekey", 0x02),
    ("dupsort", 0x04),
    ("integerkey", 0x08),
    ("dupfixed", 0x10),
    ("integerdup", 0x20),
    ("reversedup", 0x40),
];

/// The DUPSORT bit.
pub const DUPSORT: u32 = 0x04;

/// How keys and values are spelled on their lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Two lowercase hex digits per byte.
    Bytevalue,
    /// Printable ASCII but the backslash as is, `\hh` for any other byte.
    Print,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Bytevalue => "bytevalue",
            Format::Print => "print",
        }
    }
}

/// One database's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// `VERSION=` (1 to 3).
    pub version: u32,
    /// `format=`.
    pub format: Format,
    /// `database=`: the named database, or None for the main database.
    pub database: Option<String>,
    /// `mapsize=`, if given.
    pub mapsize: Option<u64>,
    /// `maxreaders=`, if given.
    pub maxreaders: Option<u32>,
    /// Database flags (LMDB bits, see [`FLAG_NAMES`]).
    pub flags: u32,
    /// `db_pagesize=`, if given.
    pub pagesize: Option<u32>,
    /// Line of `HEADER=END` (0 for headers built in memory or in plain-text mode).
    pub end_line: u64,
}

impl Header {
    /// A header for writing.
    pub fn new(format: Format, database: Option<String>, flags: u32) -> Header {
        Header {
            version: 3,
            format,
            database,
            mapsize: None,
            maxreaders: None,
            flags,
            pagesize: None,
            end_line: 0,
        }
    }
}

/// Names of the flags set in `bits`, in [`FLAG_NAMES`] order.
pub fn flag_names(bits: u32) -> Vec<&'static str> {
    FLAG_NAMES
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
        .collect()
}

/// Writes a header block.
pub fn write_header(w: &mut (impl Write + ?Sized), h: &Header) -> io::Result<()> {
    writeln!(w, "VERSION={}", h.version)?;
    writeln!(w, "format={}", h.format.name())?;
    if let Some(name) = &h.database {
        writeln!(w, "database={name}")?;
    }
    writeln!(w, "type=btree")?;
    if let Some(m) = h.mapsize {
        writeln!(w, "mapsize={m}")?;
    }
    if let Some(m) = h.maxreaders {
        writeln!(w, "maxreaders={m}")?;
    }
    if h.flags & DUPSORT != 0 {
        writeln!(w, "duplicates=1")?;
    }
    for name in flag_names(h.flags) {
        writeln!(w, "{name}=1")?;
    }
    if let Some(p) = h.pagesize {
        writeln!(w, "db_pagesize={p}")?;
    }
    writeln!(w, "HEADER=END")
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends one key or value line (leading space unless `plain`, trailing newline) to `out`.
pub fn encode_item(out: &mut Vec<u8>, format: Format, bytes: &[u8], plain: bool) {
    if !plain {
        out.push(b' ');
    }
    match format {
        Format::Bytevalue => {
            for &b in bytes {
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 15)]);
            }
        }
        Format::Print => {
            for &b in bytes {
                if (0x20..0x7f).contains(&b) && b != b'\\' {
                    out.push(b);
                } else {
                    out.push(b'\\');
                    out.push(HEX[usize::from(b >> 4)]);
                    out.push(HEX[usize::from(b & 15)]);
                }
            }
        }
    }
    out.push(b'\n');
}

/// Writes one key or value line.
pub fn write_item(w: &mut (impl Write + ?Sized), format: Format, bytes: &[u8]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(bytes.len() * 2 + 2);
    encode_item(&mut buf, format, bytes, false);
    w.write_all(&buf)
}

/// Writes the end of a data block.
pub fn write_end(w: &mut (impl Write + ?Sized)) -> io::Result<()> {
    w.write_all(b"DATA=END\n")
}

/// A key and its value.
pub type Pair = (Vec<u8>, Vec<u8>);

/// A malformed input, with the line where it went wrong.
#[derive(Debug)]
pub enum ParseError {
    /// The text is not in the format.
    Syntax {
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        msg: String,
    },
    /// Reading the input failed.
    Io(io::Error),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Syntax { line, msg } => write!(f, "line {line}: {msg}"),
            ParseError::Io(e) => write!(f, "reading the input: {e}"),
        }
    }
}

impl std::error::Error for ParseError {}

impl From<io::Error> for ParseError {
    fn from(e: io::Error) -> Self {
        ParseError::Io(e)
    }
}

/// Reads dumps (or, in plain-text mode, `mdb_load -T` input) one header and one pair at a time.
pub struct Reader<R> {
    r: R,
    line: u64,
    plain: bool,
    buf: Vec<u8>,
    /// Header keywords this reader did not know, with their lines (ignored, as `mdb_load` does).
    pub warnings: Vec<(u64, String)>,
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl<R: BufRead> Reader<R> {
    /// A reader of dumps with headers.
    pub fn new(r: R) -> Reader<R> {
        Reader {
            r,
            line: 0,
            plain: false,
            buf: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// A reader of plain text: no header, no leading space, print escapes (`mdb_load -T`).
    pub fn plain(r: R) -> Reader<R> {
        Reader {
            plain: true,
            ..Reader::new(r)
        }
    }

    /// The number of the last line read.
    pub fn line(&self) -> u64 {
        self.line
    }

    fn err<T>(&self, msg: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError::Syntax {
            line: self.line,
            msg: msg.into(),
        })
    }

    /// Reads the next line into `buf` without its newline; false at end of input. A last line
    /// without a newline is reported through `complete`.
    fn next_line(&mut self) -> Result<Option<bool>, ParseError> {
        self.buf.clear();
        let n = self.r.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let complete = self.buf.last() == Some(&b'\n');
        if complete {
            self.buf.pop();
        }
        // Dumps escape every control byte, so a carriage return can only come from an editor
        // that saved the file with Windows line endings; say so rather than "not hex".
        if !self.plain && self.buf.last() == Some(&b'\r') {
            return self.err(
                "line ends with a carriage return (Windows line endings: convert the file to LF)",
            );
        }
        Ok(Some(complete))
    }

    /// Reads the next header; None at the end of the input. Plain-text readers have no header.
    pub fn next_header(&mut self) -> Result<Option<Header>, ParseError> {
        let mut h = Header::new(Format::Bytevalue, None, 0);
        let mut first = true;
        loop {
            let Some(complete) = self.next_line()? else {
                if first {
                    return Ok(None);
                }
                self.line += 1;
                return self.err("unexpected end of input inside a header (no HEADER=END)");
            };
            first = false;
            if !complete {
                return self.err("unexpected end of input: the line has no newline");
            }
            let line = std::mem::take(&mut self.buf);
            let r = self.header_line(&mut h, &line);
            self.buf = line;
            if r? {
                h.end_line = self.line;
                return Ok(Some(h));
            }
        }
    }

    /// Applies one header line; true at `HEADER=END`.
    fn header_line(&mut self, h: &mut Header, line: &[u8]) -> Result<bool, ParseError> {
        if line == b"HEADER=END" {
            return Ok(true);
        }
        let Some(eq) = line.iter().position(|&c| c == b'=') else {
            if line.first() == Some(&b' ') {
                return self.err("data line inside a header (missing HEADER=END)");
            }
            return self.err("expected a header line (keyword=value)");
        };
        let (key, val) = (&line[..eq], &line[eq + 1..]);
        let Ok(val) = std::str::from_utf8(val) else {
            return self.err("header value is not UTF-8");
        };
        let num = |me: &Self, what: &str| -> Result<u64, ParseError> {
            val.parse::<u64>().or_else(|_| {
                me.err(format!(
                    "invalid {what} {val:?} (expected a decimal number)"
                ))
            })
        };
        match key {
            b"VERSION" => {
                let v = num(self, "VERSION")?;
                if !(1..=3).contains(&v) {
                    return self.err(format!("unsupported VERSION {v} (1 to 3 are read)"));
                }
                h.version = v as u32;
            }
            b"format" => {
                h.format = match val {
                    "bytevalue" => Format::Bytevalue,
                    "print" => Format::Print,
                    _ => return self.err(format!("unsupported format {val:?}")),
                }
            }
            b"database" => {
                if val.is_empty() {
                    return self.err("empty database name");
                }
                h.database = Some(val.to_string());
            }
            b"type" => {
                if val != "btree" {
                    return self.err(format!("unsupported type {val:?} (only btree)"));
                }
            }
            b"mapsize" => h.mapsize = Some(num(self, "mapsize")?),
            b"maxreaders" => {
                let n = num(self, "maxreaders")?;
                h.maxreaders =
                    Some(u32::try_from(n).or_else(|_| self.err("maxreaders too large"))?);
            }
            b"db_pagesize" => {
                let n = num(self, "db_pagesize")?;
                h.pagesize = Some(u32::try_from(n).or_else(|_| self.err("db_pagesize too large"))?);
            }
            // Berkeley DB's spelling of dupsort: `mdb_dump` writes it and `mdb_load` skips it,
            // since `dupsort=1` follows; the same here.
            b"duplicates" => {}
            // An address for LMDB's FIXEDMAP; Cairn maps where the OS likes.
            b"mapaddr" => {}
            _ => {
                if let Some((_, bit)) = FLAG_NAMES.iter().find(|(n, _)| n.as_bytes() == key) {
                    match val {
                        "1" => h.flags |= bit,
                        "0" => h.flags &= !bit,
                        _ => {
                            return self.err(format!(
                                "invalid value {val:?} for {} (expected 0 or 1)",
                                String::from_utf8_lossy(key)
                            ))
                        }
                    }
                } else {
                    let k = String::from_utf8_lossy(key).into_owned();
                    self.warnings.push((self.line, k));
                }
            }
        }
        Ok(false)
    }

    /// Reads the next key/value pair of the current block; None at `DATA=END` (or, in plain
    /// mode, at the end of the input).
    pub fn next_pair(&mut self, format: Format) -> Result<Option<Pair>, ParseError> {
        let Some(key) = self.item(format, true)? else {
            return Ok(None);
        };
        match self.item(format, false)? {
            Some(val) => Ok(Some((key, val))),
            None => self.err("a key without its value"),
        }
    }

    /// Reads one data line. `at_key`: a block may end here.
    fn item(&mut self, format: Format, at_key: bool) -> Result<Option<Vec<u8>>, ParseError> {
        let Some(complete) = self.next_line()? else {
            if self.plain && at_key {
                return Ok(None);
            }
            // Point at the line after the last one: that is where more was expected.
            self.line += 1;
            return if at_key {
                self.err("unexpected end of input (no DATA=END)")
            } else {
                self.err("unexpected end of input: a key without its value")
            };
        };
        if !self.plain && self.buf == b"DATA=END" {
            if at_key {
                return Ok(None);
            }
            return self.err("DATA=END after a key: the key has no value");
        }
        if !complete {
            return self.err("unexpected end of input: the line has no newline");
        }
        let body = if self.plain {
            &self.buf[..]
        } else {
            match self.buf.split_first() {
                Some((b' ', rest)) => rest,
                _ => {
                    return self.err(
                        "data lines must start with one space (or the block end with DATA=END)",
                    )
                }
            }
        };
        let decoded = match format {
            Format::Bytevalue => decode_hex(body),
            Format::Print => decode_print(body),
        };
        match decoded {
            Ok(v) => Ok(Some(v)),
            Err(msg) => self.err(msg),
        }
    }
}

fn decode_hex(s: &[u8]) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!(
            "odd number of hex digits ({}) in a bytevalue line",
            s.len()
        ));
    }
    s.chunks(2)
        .enumerate()
        .map(|(i, p)| match (hex_val(p[0]), hex_val(p[1])) {
            (Some(a), Some(b)) => Ok(a << 4 | b),
            _ => Err(format!(
                "not a hex digit at column {} of a bytevalue line",
                2 + 2 * i + usize::from(hex_val(p[0]).is_some())
            )),
        })
        .collect()
}

fn decode_print(s: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'\\' {
            out.push(s[i]);
            i += 1;
        } else if s.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            match (
                s.get(i + 1).copied().and_then(hex_val),
                s.get(i + 2).copied().and_then(hex_val),
            ) {
                (Some(a), Some(b)) => out.push(a << 4 | b),
                _ => {
                    return Err(format!(
                        "bad escape at column {}: a backslash must be followed by a backslash or two hex digits (LMDB 0.9's mdb_dump -p leaves backslashes unescaped: dump in bytevalue form instead)",
                        i + 2
                    ))
                }
            }
            i += 3;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_err<T: std::fmt::Debug>(r: Result<T, ParseError>) -> (u64, String) {
        match r {
            Err(ParseError::Syntax { line, msg }) => (line, msg),
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn header_round_trip() {
        let mut h = Header::new(Format::Print, Some("a b=c".into()), 0x02 | 0x04 | 0x08);
        h.mapsize = Some(1 << 30);
        h.maxreaders = Some(126);
        h.pagesize = Some(8192);
        let mut out = Vec::new();
        write_header(&mut out, &h).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains("duplicates=1\nreversekey=1\ndupsort=1\nintegerkey=1\n"));
        let mut r = Reader::new(&out[..]);
        let got = r.next_header().unwrap().unwrap();
        assert_eq!(got.end_line, text.lines().count() as u64);
        assert_eq!(Header { end_line: 0, ..got }, h);
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn items_round_trip_every_byte() {
        let all: Vec<u8> = (0..=255u8).chain(b"\\41\\\\x".iter().copied()).collect();
        for f in [Format::Bytevalue, Format::Print] {
            let mut out = Vec::new();
            write_item(&mut out, f, &all).unwrap();
            write_item(&mut out, f, b"").unwrap();
            write_end(&mut out).unwrap();
            let mut r = Reader::new(&out[..]);
            assert_eq!(r.next_pair(f).unwrap(), Some((all.clone(), Vec::new())));
            assert_eq!(r.next_pair(f).unwrap(), None);
        }
    }

    #[test]
    fn errors_name_their_line() {
        let mut r = Reader::new(&b"VERSION=3\nHEADER=END\n 0g\n 00\nDATA=END\n"[..]);
        r.next_header().unwrap().unwrap();
        let (line, msg) = line_err(r.next_pair(Format::Bytevalue));
        assert_eq!((line, msg.contains("hex digit")), (3, true), "{msg}");
    }

    #[test]
    fn malformed_lines() {
        let body = |s: &str| {
            let text = format!("VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n{s}");
            let mut r = Reader::new(std::io::Cursor::new(text.into_bytes()));
            r.next_header().unwrap().unwrap();
            loop {
                match r.next_pair(Format::Bytevalue) {
                    Ok(Some(_)) => continue,
                    other => return line_err(other),
                }
            }
        };
        for (input, line) in [
            (" 616\n 62\nDATA=END\n", 5),
            (" 61\n 62\n 6x\n 62\n", 7),
            (" 61\n", 6),
            (" 61\nDATA=END\n", 6),
            (" 61\n 62\nxyz\n", 7),
            (" 61\n 62\n", 7),
        ] {
            assert_eq!(body(input).0, line, "{input:?}");
        }
        assert!(body(" 61\n 62\n 63\n 64").1.contains("newline"));
        let hdr = |s: &str| line_err(Reader::new(s.as_bytes()).next_header());
        for (input, line) in [
            ("VERSION=4\n", 1),
            ("VERSION=3\nformat=xml\n", 2),
            ("VERSION=3\ntype=hash\n", 2),
            ("VERSION=3\nnonsense\n", 2),
            ("VERSION=3\ndupsort=yes\n", 2),
            ("VERSION=3\nmapsize=-1\n", 2),
            ("VERSION=3\n 6161\n", 2),
            ("VERSION=3\nformat=print\n", 3),
        ] {
            assert_eq!(hdr(input).0, line, "{input:?}");
        }
    }

    #[test]
    fn print_escapes() {
        assert_eq!(decode_print(b"a\\5cb\\\\").unwrap(), b"a\\b\\");
        assert!(decode_print(b"a\\5").is_err());
        assert!(decode_print(b"a\\zz").is_err());
        let mut out = Vec::new();
        encode_item(&mut out, Format::Print, b"a\\b\n\x7f~ ", true);
        assert_eq!(out, b"a\\5cb\\0a\\7f~ \n");
    }

    #[test]
    fn windows_line_endings_are_named() {
        let (line, msg) = line_err(Reader::new(&b"VERSION=3\r\nHEADER=END\r\n"[..]).next_header());
        assert_eq!(line, 1);
        assert!(msg.contains("carriage return"), "{msg}");
    }

    #[test]
    fn unknown_keywords_warn() {
        let mut r = Reader::new(&b"VERSION=3\ngeometry=l1,u2\nHEADER=END\nDATA=END\n"[..]);
        r.next_header().unwrap().unwrap();
        assert_eq!(r.warnings, vec![(2, "geometry".to_string())]);
        assert_eq!(r.next_pair(Format::Bytevalue).unwrap(), None);
        assert_eq!(r.next_header().unwrap(), None);
    }

    #[test]
    fn plain_text() {
        let mut r = Reader::plain(&b"k1\nv\\0a\nk2\n\n"[..]);
        assert_eq!(
            r.next_pair(Format::Print).unwrap(),
            Some((b"k1".to_vec(), b"v\n".to_vec()))
        );
        assert_eq!(
            r.next_pair(Format::Print).unwrap(),
            Some((b"k2".to_vec(), Vec::new()))
        );
        assert_eq!(r.next_pair(Format::Print).unwrap(), None);
        let mut r = Reader::plain(&b"k1\nv\nk2\n"[..]);
        r.next_pair(Format::Print).unwrap().unwrap();
        assert_eq!(line_err(r.next_pair(Format::Print)).0, 4);
    }
}
