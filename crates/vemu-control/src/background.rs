//! The controller's helper threads (timeline, mobility, fidelity monitor): each runs
//! until it returns or is told to stop.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

pub(crate) struct Background {
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Run `body` on a thread named `name` (if `needed`); it should return soon after
    /// its receiver reports [`Background::stop`] (a message or a disconnection).
    pub fn spawn(
        name: &str,
        needed: bool,
        body: impl FnOnce(Receiver<()>) + Send + 'static,
    ) -> Background {
        let (stop, rx) = channel();
        let thread = needed
            .then(|| std::thread::Builder::new().name(name.into()).spawn(move || body(rx)).ok())
            .flatten();
        Background { stop, thread }
    }

    pub fn stop(mut self) {
        let _ = self.stop.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
