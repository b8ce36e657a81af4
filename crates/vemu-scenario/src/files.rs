//! Reading the files a scenario names (traces, templates, delay files, GeoJSON): regular
//! files only, never more than their limit, with their size and modification time.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Read a text file named in a scenario: a regular file (not a device, FIFO or
/// directory, which could be endless or block) of at most `max_bytes`.
pub(crate) fn read_limited(path: &Path, max_bytes: u64) -> Result<String, String> {
    read_stamped(path, max_bytes).map(|(text, _)| text)
}

/// [`read_limited`], with the size and modification time of what was read.
pub(crate) fn read_stamped(path: &Path, max_bytes: u64) -> Result<(String, FileStamp), String> {
    let (bytes, stamp) = read_bytes(path, max_bytes)?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    Ok((text, stamp))
}

/// A file named in a scenario, as bytes: a regular file of at most `max_bytes`.
pub(crate) fn read_bytes(path: &Path, max_bytes: u64) -> Result<(Vec<u8>, FileStamp), String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max_bytes {
        return Err(format!("{} bytes, more than the {max_bytes} allowed", meta.len()));
    }
    let mut bytes = Vec::new();
    // The file may grow while it is read: never take more than the limit.
    f.take(max_bytes + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!("more than the {max_bytes} bytes allowed"));
    }
    Ok((bytes, FileStamp::of(&meta)))
}

/// Size and modification time of a file, to tell whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub bytes: u64,
    pub modified_ns: i128,
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            bytes: meta.len(),
            modified_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        }
    }
}
