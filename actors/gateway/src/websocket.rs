//! The few pieces of RFC 6455 the remote-command protocol needs: the handshake's accept key,
//! server frames (never masked), and client frames read back into messages (unmasked,
//! fragments joined, control frames surfaced between them).

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt};

pub const OP_CONTINUATION: u8 = 0x0;
pub const OP_TEXT: u8 = 0x1;
pub const OP_BINARY: u8 = 0x2;
pub const OP_CLOSE: u8 = 0x8;
pub const OP_PING: u8 = 0x9;
pub const OP_PONG: u8 = 0xA;

/// The largest message a client may send (kubectl's stdin chunks are 32 KiB at most).
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// `Sec-WebSocket-Accept` for a client's key (RFC 6455 §4.2.2).
pub fn accept_key(key: &str) -> String {
    const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{GUID}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// One unfragmented server frame (servers never mask).
pub fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= u16::MAX as usize => {
            out.push(126);
            out.extend((n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend((n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// A close frame with its status code (1000: normal closure).
pub fn close_frame(code: u16) -> Vec<u8> {
    frame(OP_CLOSE, &code.to_be_bytes())
}

/// What a client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A whole data message (binary or text: the remote-command protocol uses binary).
    Data(Vec<u8>),
    Ping(Vec<u8>),
    Pong,
    Close,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("reading from the client: {0}")]
    Io(#[from] std::io::Error),
    #[error("bad WebSocket frame from the client: {0}")]
    Protocol(String),
}

/// Reads a client's frames into messages.
pub struct Reader<R> {
    io: R,
    partial: Option<Vec<u8>>,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    pub fn new(io: R) -> Self {
        Reader { io, partial: None }
    }

    pub async fn next(&mut self) -> Result<Message, ReadError> {
        loop {
            let (fin, opcode, payload) = self.frame().await?;
            match opcode {
                OP_PING => return Ok(Message::Ping(payload)),
                OP_PONG => return Ok(Message::Pong),
                OP_CLOSE => return Ok(Message::Close),
                OP_TEXT | OP_BINARY if self.partial.is_some() => {
                    return Err(ReadError::Protocol(
                        "a new message began inside a fragmented one".into(),
                    ))
                }
                OP_TEXT | OP_BINARY if fin => return Ok(Message::Data(payload)),
                OP_TEXT | OP_BINARY => self.partial = Some(payload),
                OP_CONTINUATION => {
                    let Some(mut data) = self.partial.take() else {
                        return Err(ReadError::Protocol(
                            "a continuation frame without a message to continue".into(),
                        ));
                    };
                    if data.len() + payload.len() > MAX_MESSAGE_BYTES {
                        return Err(ReadError::Protocol(format!(
                            "a message over {MAX_MESSAGE_BYTES} bytes"
                        )));
                    }
                    data.extend_from_slice(&payload);
                    if fin {
                        return Ok(Message::Data(data));
                    }
                    self.partial = Some(data);
                }
                other => {
                    return Err(ReadError::Protocol(format!("unknown opcode {other:#x}")));
                }
            }
        }
    }

    /// One frame: (FIN, opcode, unmasked payload).
    async fn frame(&mut self) -> Result<(bool, u8, Vec<u8>), ReadError> {
        let mut head = [0u8; 2];
        self.io.read_exact(&mut head).await?;
        let fin = head[0] & 0x80 != 0;
        let opcode = head[0] & 0x0F;
        if head[0] & 0x70 != 0 {
            return Err(ReadError::Protocol(
                "reserved bits set (no extension was negotiated)".into(),
            ));
        }
        if head[1] & 0x80 == 0 {
            return Err(ReadError::Protocol(
                "an unmasked frame (clients must mask every frame)".into(),
            ));
        }
        let len = match head[1] & 0x7F {
            126 => u64::from(self.io.read_u16().await?),
            127 => self.io.read_u64().await?,
            n => u64::from(n),
        };
        if opcode >= OP_CLOSE && (len > 125 || !fin) {
            return Err(ReadError::Protocol(
                "a control frame longer than 125 bytes or fragmented".into(),
            ));
        }
        if len > MAX_MESSAGE_BYTES as u64 {
            return Err(ReadError::Protocol(format!(
                "a frame over {MAX_MESSAGE_BYTES} bytes"
            )));
        }
        let mut mask = [0u8; 4];
        self.io.read_exact(&mut mask).await?;
        let mut payload = vec![0u8; len as usize];
        self.io.read_exact(&mut payload).await?;
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
        Ok((fin, opcode, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
        assert!(payload.len() < 126);
        out.push(0x80 | payload.len() as u8);
        out.extend(mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        out
    }

    #[test]
    fn accept_key_follows_rfc6455() {
        // The example handshake of RFC 6455 §1.3.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn frames_carry_their_length() {
        assert_eq!(frame(OP_BINARY, b"ab"), vec![0x82, 2, b'a', b'b']);
        let long = frame(OP_BINARY, &[0; 300]);
        assert_eq!(&long[..4], &[0x82, 126, 1, 44]);
    }

    #[tokio::test]
    async fn masked_fragments_are_joined_around_a_ping() {
        let mut wire = masked(false, OP_BINARY, b"\x00ec");
        wire.extend(masked(true, OP_PING, b"hb"));
        wire.extend(masked(true, OP_CONTINUATION, b"ho\n"));
        wire.extend(masked(true, OP_CLOSE, &1000u16.to_be_bytes()));
        let mut reader = Reader::new(&wire[..]);
        assert_eq!(reader.next().await.unwrap(), Message::Ping(b"hb".to_vec()));
        assert_eq!(
            reader.next().await.unwrap(),
            Message::Data(b"\x00echo\n".to_vec())
        );
        assert_eq!(reader.next().await.unwrap(), Message::Close);
    }

    #[tokio::test]
    async fn unmasked_client_frames_are_refused() {
        let wire = frame(OP_BINARY, b"\x00x");
        let err = Reader::new(&wire[..]).next().await.unwrap_err();
        assert!(err.to_string().contains("unmasked"), "{err}");
    }
}
