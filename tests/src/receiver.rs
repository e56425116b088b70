//! A webhook receiver on loopback for the tests: records every request (headers and raw body)
//! and answers as told: 200, another status, not before 12 seconds (past the deadline), 200
//! with a body that never ends, or 400 to one type of event.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `200 OK`.
    Ok,
    /// This status.
    Status(u16),
    /// Answers 200, but only after 12 seconds.
    Hang,
    /// Answers 200 and then streams a body without end (until the client hangs up, or a minute).
    Endless,
    /// Answers 500 to about this percentage of requests, at random, 200 to the rest.
    FailRandomly(u8),
    /// Answers 400 to events of this type, 200 to the rest (a receiver that cannot take one
    /// kind of event).
    RefuseType(&'static str),
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Lower-case header names.
    pub headers: HashMap<String, String>,
    /// The raw body.
    pub body: Vec<u8>,
    /// When it arrived.
    pub at: Instant,
    /// The status it was answered with.
    pub answered: u16,
}

impl Received {
    /// A header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// A running receiver.
pub struct Receiver {
    /// Its port on 127.0.0.1.
    pub port: u16,
    mode: Arc<Mutex<Mode>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// Starts on a free port.
    pub fn start() -> Receiver {
        Receiver::start_on(0)
    }

    /// Starts on `port` (0 for any).
    pub fn start_on(port: u16) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind receiver");
        let port = listener.local_addr().expect("address").port();
        let mode = Arc::new(Mutex::new(Mode::Ok));
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let (m, r) = (mode.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (m, r) = (m.clone(), r.clone());
                std::thread::spawn(move || serve(stream, &m, &r));
            }
        });
        Receiver {
            port,
            mode,
            received,
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Changes how it answers from now on.
    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().expect("mode") = mode;
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("received").clone()
    }
}

/// A number from 0 to 99, uniformly at random enough for a failure rate (xorshift over a shared
/// state seeded from the clock).
fn roll() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1);
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    x % 100
}

fn serve(mut stream: TcpStream, mode: &Mutex<Mode>, received: &Mutex<Vec<Received>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let headers: HashMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while data.len() < head_end + length {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    let body = data[head_end..].to_vec();
    let current = *mode.lock().expect("mode");
    let status = match current {
        Mode::Ok | Mode::Endless | Mode::Hang => 200,
        Mode::Status(code) => code,
        Mode::FailRandomly(percent) if roll() < u64::from(percent) => 500,
        Mode::FailRandomly(_) => 200,
        Mode::RefuseType(kind) => {
            let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if event["type"] == kind {
                400
            } else {
                200
            }
        }
    };
    received.lock().expect("received").push(Received {
        headers,
        body,
        at: Instant::now(),
        answered: status,
    });
    if current == Mode::Endless {
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        );
        let chunk = [b'x'; 16 * 1024];
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until && stream.write_all(&chunk).is_ok() {}
        return;
    }
    if current == Mode::Hang {
        std::thread::sleep(Duration::from_secs(12));
    }
    let _ = write!(
        stream,
        "HTTP/1.1 {status} Whatever\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\
         Connection: close\r\n\r\nreceived."
    );
}
