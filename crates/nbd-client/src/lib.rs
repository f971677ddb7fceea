//! A small blocking NBD client: the fixed newstyle handshake with `NBD_OPT_EXPORT_NAME`, then
//! one request at a time with simple replies (the NBD protocol, `doc/proto.md` of the NBD
//! project). Several clients on one server give as many requests in flight (the server must
//! allow multi-conn, as `tierwise serve` does).
//!
//! URIs: `nbd+unix:///[EXPORT]?socket=PATH` and `nbd://HOST[:PORT][/EXPORT]`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

const NBDMAGIC: u64 = 0x4e42_444d_4147_4943; // "NBDMAGIC"
const IHAVEOPT: u64 = 0x4948_4156_454f_5054; // "IHAVEOPT"
const REQUEST_MAGIC: u32 = 0x2560_9513;
const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
const FLAG_FIXED_NEWSTYLE: u16 = 1;
const FLAG_NO_ZEROES: u16 = 2;
const OPT_EXPORT_NAME: u32 = 1;
const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_FLUSH: u16 = 3;
const CMD_TRIM: u16 = 4;
const CMD_WRITE_ZEROES: u16 = 6;
const CMD_FLAG_FUA: u16 = 1;
/// Requests are split at this size (servers accept at least 32 MiB).
const MAX_REQUEST: usize = 32 << 20;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NbdError {
    /// The URI is not one this client speaks.
    #[error("{0}: expected nbd+unix:///?socket=PATH or nbd://HOST[:PORT][/EXPORT]")]
    Uri(String),
    /// The connection failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The server does not speak the fixed newstyle protocol.
    #[error("not an NBD server (or not fixed newstyle): {0}")]
    Protocol(String),
    /// The server answered a request with an error (a Linux errno).
    #[error("the server answered {what} with errno {errno} ({})", io::Error::from_raw_os_error(*errno as i32))]
    Server {
        /// The request.
        what: &'static str,
        /// The NBD error (Linux errno values).
        errno: u32,
    },
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

/// One connection to an NBD export.
pub struct NbdClient {
    stream: Stream,
    size: u64,
    transmission_flags: u16,
    handle: u64,
    header: Vec<u8>,
}

impl std::fmt::Debug for NbdClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdClient").field("size", &self.size).finish()
    }
}

fn parse_uri(uri: &str) -> Result<(Stream, String), NbdError> {
    let bad = || NbdError::Uri(uri.to_string());
    if let Some(rest) = uri.strip_prefix("nbd+unix://") {
        let (path, query) = rest.split_once('?').ok_or_else(bad)?;
        let export = path.trim_start_matches('/').to_string();
        let socket = query.split('&').find_map(|kv| kv.strip_prefix("socket=")).ok_or_else(bad)?;
        Ok((Stream::Unix(UnixStream::connect(socket)?), export))
    } else if let Some(rest) = uri.strip_prefix("nbd://") {
        let (hostport, export) = rest.split_once('/').unwrap_or((rest, ""));
        let addr = if hostport.contains(':') { hostport.to_string() } else { format!("{hostport}:10809") };
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Ok((Stream::Tcp(s), export.to_string()))
    } else {
        Err(bad())
    }
}

impl NbdClient {
    /// Connects and negotiates the export.
    pub fn connect(uri: &str) -> Result<NbdClient, NbdError> {
        let (mut stream, export) = parse_uri(uri)?;
        let mut hello = [0u8; 18];
        stream.read_exact(&mut hello)?;
        let magic = u64::from_be_bytes(hello[0..8].try_into().unwrap_or_default());
        let opt = u64::from_be_bytes(hello[8..16].try_into().unwrap_or_default());
        if magic != NBDMAGIC || opt != IHAVEOPT {
            return Err(NbdError::Protocol("no newstyle greeting".into()));
        }
        let server_flags = u16::from_be_bytes([hello[16], hello[17]]);
        if server_flags & FLAG_FIXED_NEWSTYLE == 0 {
            return Err(NbdError::Protocol("the server is not fixed newstyle".into()));
        }
        let no_zeroes = server_flags & FLAG_NO_ZEROES != 0;
        let client_flags = u32::from(FLAG_FIXED_NEWSTYLE) | if no_zeroes { u32::from(FLAG_NO_ZEROES) } else { 0 };
        let mut msg = Vec::with_capacity(20 + export.len());
        msg.extend_from_slice(&client_flags.to_be_bytes());
        msg.extend_from_slice(&IHAVEOPT.to_be_bytes());
        msg.extend_from_slice(&OPT_EXPORT_NAME.to_be_bytes());
        msg.extend_from_slice(&(export.len() as u32).to_be_bytes());
        msg.extend_from_slice(export.as_bytes());
        stream.write_all(&msg)?;
        let mut reply = [0u8; 10];
        stream.read_exact(&mut reply).map_err(|_| NbdError::Protocol(format!("export {export:?} refused")))?;
        let size = u64::from_be_bytes(reply[0..8].try_into().unwrap_or_default());
        let transmission_flags = u16::from_be_bytes([reply[8], reply[9]]);
        if !no_zeroes {
            let mut zeroes = [0u8; 124];
            stream.read_exact(&mut zeroes)?;
        }
        Ok(NbdClient { stream, size, transmission_flags, handle: 0, header: Vec::with_capacity(28) })
    }

    /// The export's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The server's transmission flags (NBD_FLAG_SEND_FUA is 1 << 3, ...).
    pub fn transmission_flags(&self) -> u16 {
        self.transmission_flags
    }

    fn request(&mut self, cmd: u16, flags: u16, offset: u64, len: u32, data: &[u8]) -> io::Result<u64> {
        self.handle = self.handle.wrapping_add(1);
        let h = &mut self.header;
        h.clear();
        h.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        h.extend_from_slice(&flags.to_be_bytes());
        h.extend_from_slice(&cmd.to_be_bytes());
        h.extend_from_slice(&self.handle.to_be_bytes());
        h.extend_from_slice(&offset.to_be_bytes());
        h.extend_from_slice(&len.to_be_bytes());
        if data.is_empty() {
            self.stream.write_all(&self.header)?;
        } else {
            let mut msg = Vec::with_capacity(28 + data.len());
            msg.extend_from_slice(&self.header);
            msg.extend_from_slice(data);
            self.stream.write_all(&msg)?;
        }
        Ok(self.handle)
    }

    fn reply(&mut self, what: &'static str, handle: u64, data: &mut [u8]) -> Result<(), NbdError> {
        let mut r = [0u8; 16];
        self.stream.read_exact(&mut r)?;
        let magic = u32::from_be_bytes(r[0..4].try_into().unwrap_or_default());
        let errno = u32::from_be_bytes(r[4..8].try_into().unwrap_or_default());
        let h = u64::from_be_bytes(r[8..16].try_into().unwrap_or_default());
        if magic != SIMPLE_REPLY_MAGIC || h != handle {
            return Err(NbdError::Protocol(format!("unexpected reply (magic {magic:#x}, handle {h})")));
        }
        if errno != 0 {
            return Err(NbdError::Server { what, errno });
        }
        if !data.is_empty() {
            self.stream.read_exact(data)?;
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&mut self, buf: &mut [u8], offset: u64) -> Result<(), NbdError> {
        let mut done = 0;
        while done < buf.len() {
            let n = (buf.len() - done).min(MAX_REQUEST);
            let h = self.request(CMD_READ, 0, offset + done as u64, n as u32, &[])?;
            self.reply("a read", h, &mut buf[done..done + n])?;
            done += n;
        }
        Ok(())
    }

    /// Writes `buf` at `offset`; with `fua` it is durable when this returns.
    pub fn write(&mut self, buf: &[u8], offset: u64, fua: bool) -> Result<(), NbdError> {
        let flags = if fua { CMD_FLAG_FUA } else { 0 };
        let mut done = 0;
        while done < buf.len() {
            let n = (buf.len() - done).min(MAX_REQUEST);
            let h = self.request(CMD_WRITE, flags, offset + done as u64, n as u32, &buf[done..done + n])?;
            self.reply("a write", h, &mut [])?;
            done += n;
        }
        Ok(())
    }

    /// Makes every completed write durable.
    pub fn flush(&mut self) -> Result<(), NbdError> {
        let h = self.request(CMD_FLUSH, 0, 0, 0, &[])?;
        self.reply("a flush", h, &mut [])
    }

    /// Discards a range.
    pub fn trim(&mut self, offset: u64, len: u32) -> Result<(), NbdError> {
        let h = self.request(CMD_TRIM, 0, offset, len, &[])?;
        self.reply("a trim", h, &mut [])
    }

    /// Writes zeroes.
    pub fn write_zeroes(&mut self, offset: u64, len: u32, fua: bool) -> Result<(), NbdError> {
        let h = self.request(CMD_WRITE_ZEROES, if fua { CMD_FLAG_FUA } else { 0 }, offset, len, &[])?;
        self.reply("a write of zeroes", h, &mut [])
    }

    /// Says goodbye (the server closes the connection).
    pub fn disconnect(mut self) -> Result<(), NbdError> {
        self.request(CMD_DISC, 0, 0, 0, &[])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_that_are_not_nbd_are_refused_with_the_forms_allowed() {
        for bad in ["http://x", "nbd+unix:///", "nbd+unix:///?sock=/x", "/tmp/socket"] {
            let e = NbdClient::connect(bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("expected nbd+unix"), "{bad}: {e}");
        }
    }
}
