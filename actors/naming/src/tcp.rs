//! DNS over TCP (RFC 7766): two-byte length prefix, several queries per connection answered
//! in order, idle connections closed, a cap on concurrent connections.

use std::sync::Arc;
use std::time::Duration;

use shoal_bus::shutdown::Shutdown;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::answer::{respond, Transport};
use crate::index::Index;

/// A connection with no complete query for this long is closed.
const IDLE: Duration = Duration::from_secs(10);
/// Beyond this many open connections, new ones are closed at once.
const MAX_CONNECTIONS: usize = 512;

/// Serves `listener` until `shutdown`; open connections are dropped then.
pub async fn serve(listener: std::net::TcpListener, index: Arc<Index>, shutdown: Shutdown) {
    let addr = listener.local_addr().ok();
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(listener))
    {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(?addr, error = %e, "TCP listener unusable; DNS over TCP off");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    let stop = shutdown.wait();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        tracing::debug!(%peer, "too many DNS TCP connections; closing");
                        continue;
                    };
                    let index = index.clone();
                    connections.spawn(async move {
                        if let Err(e) = connection(stream, &index).await {
                            tracing::debug!(%peer, error = %e, "DNS TCP connection ended");
                        }
                        drop(slot);
                    });
                }
                Err(e) => {
                    // Out of descriptors, typically: back off instead of spinning.
                    tracing::warn!(?addr, error = %e, "accepting a DNS TCP connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    connections.abort_all();
}

async fn connection(mut stream: TcpStream, index: &Index) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut query = Vec::new();
    let mut out = Vec::new();
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(IDLE, stream.read_exact(&mut len)).await {
            Err(_) => return Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(_)) => {}
        }
        query.resize(u16::from_be_bytes(len) as usize, 0);
        match tokio::time::timeout(IDLE, stream.read_exact(&mut query)).await {
            Err(_) => return Ok(()),
            Ok(result) => result?,
        };
        if !respond(index, &query, Transport::Tcp, &mut out) {
            // Nothing to answer to (no header): the stream cannot be trusted any further.
            return Ok(());
        }
        let Ok(out_len) = u16::try_from(out.len()) else {
            return Ok(());
        };
        let mut framed = Vec::with_capacity(out.len() + 2);
        framed.extend_from_slice(&out_len.to_be_bytes());
        framed.extend_from_slice(&out);
        stream.write_all(&framed).await?;
    }
}
