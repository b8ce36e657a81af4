//! The tail of a node's log (`/var/log/vemu/LAB/NODE.log`: its `run` commands' and
//! timeline commands' output, and vemu's notes about its processes), for the web
//! interface's node panel and API clients.

use std::io::{Read, Seek, SeekFrom};

use serde::Deserialize;
use serde_json::{json, Value};
use vemu_host::LabPaths;

use super::ApiError;

/// How much of the log's end is sent unless asked otherwise, and at most.
pub const DEFAULT_BYTES: u64 = 16 << 10;
pub const MAX_BYTES: u64 = 1 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogQuery {
    /// How many bytes of the log's end (whole lines of them).
    pub bytes: Option<u64>,
}

impl LogQuery {
    pub fn bytes(&self) -> Result<u64, ApiError> {
        match self.bytes.unwrap_or(DEFAULT_BYTES) {
            b @ 1..=MAX_BYTES => Ok(b),
            b => Err(ApiError::bad_request(format!("bytes: {b} is not between 1 and {MAX_BYTES}"))),
        }
    }
}

/// `{"node", "size_bytes": the whole log's size, "text": its last lines}` — the lines
/// that end within the last `bytes` bytes (no partial first line); an empty text when
/// the node has written nothing yet.
pub(crate) fn tail(paths: &LabPaths, node: &str, bytes: u64) -> Result<Value, ApiError> {
    let path = paths.node_log(node);
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(json!({"node": node, "size_bytes": 0, "text": ""}))
        }
        Err(e) => return Err(ApiError::internal(format!("reading {}: {e}", path.display()))),
    };
    let io = |e: std::io::Error| ApiError::internal(format!("reading {}: {e}", path.display()));
    let size = f.metadata().map_err(io)?.len();
    let from = size.saturating_sub(bytes);
    f.seek(SeekFrom::Start(from)).map_err(io)?;
    let mut buf = Vec::with_capacity((size - from) as usize);
    f.take(bytes).read_to_end(&mut buf).map_err(io)?;
    if from > 0 {
        // Cut in the middle of a line: start at the next one.
        let start = buf.iter().position(|&b| b == b'\n').map_or(buf.len(), |i| i + 1);
        buf.drain(..start);
    }
    Ok(json!({"node": node, "size_bytes": size, "text": String::from_utf8_lossy(&buf)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_whole_lines_of_the_end() {
        let lab = format!("t-logtail-{}", std::process::id());
        let paths = LabPaths::new(&lab);
        let dir = paths.log_dir();
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(tail(&paths, "n1", 100).unwrap()["text"], "", "no log yet: empty");
        std::fs::write(paths.node_log("n1"), "first line\nsecond line\nthird\n").unwrap();
        let all = tail(&paths, "n1", DEFAULT_BYTES).unwrap();
        assert_eq!(
            (all["text"].as_str(), all["size_bytes"].as_u64()),
            (Some("first line\nsecond line\nthird\n"), Some(29))
        );
        // The last 15 bytes cut "second line" in two: only "third" is whole.
        assert_eq!(tail(&paths, "n1", 15).unwrap()["text"], "third\n");
        std::fs::remove_dir_all(&dir).unwrap();
        for (q, ok) in
            [(None, true), (Some(0), false), (Some(MAX_BYTES), true), (Some(MAX_BYTES + 1), false)]
        {
            assert_eq!(LogQuery { bytes: q }.bytes().is_ok(), ok, "{q:?}");
        }
    }
}
