//! What a station's radio makes of the transmissions that reach it: received power
//! (per pair, cached until stations move), carrier sense and preamble lock when a frame
//! arrives, the interference summed piece by piece over a frame (SINR, so capture
//! happens), and what a frame received whole or in error does — a delivery, an ACK or
//! CTS due after SIFS, NAV from someone else's Duration, EIFS after an error.

use super::*;

impl Dcf {
    /// Received power at `to` of what `from` sends, dBm (−∞ across channels).
    pub fn rx_dbm(&self, from: u32, to: u32) -> f64 {
        self.power_at(from, to).0
    }

    /// The same in W.
    pub(super) fn rx_w(&self, from: u32, to: u32) -> f64 {
        self.power_at(from, to).1
    }

    pub(super) fn power_at(&self, from: u32, to: u32) -> (f64, f64) {
        if let Some(&p) = self.power.borrow().get(&(from, to)) {
            return p;
        }
        let dbm = self.compute_rx_dbm(from, to);
        let p = (dbm, crate::watts(dbm));
        self.power.borrow_mut().insert((from, to), p);
        p
    }

    pub(super) fn compute_rx_dbm(&self, from: u32, to: u32) -> f64 {
        let (a, b) = (&self.sta[from as usize].cfg, &self.sta[to as usize].cfg);
        if a.channel != b.channel {
            return f64::NEG_INFINITY;
        }
        let radio = Radio {
            tx_power_w: a.tx_power_dbm.map_or(self.cfg.radio.tx_power_w, crate::watts),
            gain_tx: self.cfg.radio.gain_tx * db(a.gain_dbi),
            gain_rx: self.cfg.radio.gain_rx * db(b.gain_dbi),
            ..self.cfg.radio
        };
        let (pa, pb) = (self.pos[from as usize], self.pos[to as usize]);
        let loss_db = self.walls.as_ref().map_or(0.0, |w| w.loss_db(pa, pb));
        let w = self.cfg.model.mean_rx_power_lossy_w(&radio, pa.distance(pb), loss_db);
        if w == 0.0 {
            return f64::NEG_INFINITY;
        }
        if w.is_infinite() {
            return 0.0; // (a unit disk: in range is strong)
        }
        crate::dbm(w)
    }

    pub(super) fn prop_ns(&self, a: u32, b: u32) -> u64 {
        let d = self.pos[a as usize].distance(self.pos[b as usize]);
        ((d / C * 1e9).round() as u64).max(1)
    }

    pub(super) fn heard(
        &self,
        station: u32,
        tx: &Tx,
        at_ns: u64,
        signal_dbm: Option<f64>,
    ) -> Heard {
        Heard {
            station,
            at_ns,
            kind: tx.kind,
            sender: tx.sender,
            dst: tx.dst,
            id: tx.frame.filter(|_| tx.kind == Kind::Data).map(|f| f.id),
            seq: tx.frame.map_or(0, |f| f.seq),
            retry: tx.retry,
            duration_ns: tx.nav_ns,
            mode: tx.mode,
            channel: self.sta[tx.sender as usize].cfg.channel,
            signal_dbm,
            noise_dbm: self.cfg.noise_dbm,
        }
    }

    pub(super) fn tx(&self, n: u64) -> Option<&Tx> {
        self.air.iter().find(|x| x.n == n)
    }

    /// The interference at `j` from every transmission but `n` on the air at `t`, W.
    pub(super) fn interference_w(&self, j: u32, n: u64, t: u64) -> f64 {
        self.air
            .iter()
            .filter(|u| u.n != n && u.sender != j && u.start_ns <= t && u.end_ns > t)
            .map(|u| self.rx_w(u.sender, j))
            .sum()
    }

    pub(super) fn reach(&mut self, n: u64, j: u32, t: u64) {
        let Some(&tx) = self.tx(n) else { return };
        let rx = self.rx_dbm(tx.sender, j);
        let noise = self.noise_w;
        let sinr = self.rx_w(tx.sender, j) / (noise + self.interference_w(j, n, t));
        let detected = rx >= self.cfg.cca_pd_dbm && sinr >= db(self.cfg.min_sinr_db);
        let st = &self.sta[j as usize];
        if !st.up {
            return;
        }
        let for_j = tx.kind == Kind::Data && tx.dst.is_none_or(|d| d == j);
        if detected && !st.transmitting && st.locked.is_none() {
            self.sta[j as usize].locked = Some(n);
        } else if for_j && rx >= self.cfg.cca_pd_dbm {
            // Its radio was busy with something else (sending, or another frame), or the
            // frame started under interference: lost to it.
            let c = self.pairs.entry((tx.sender, j)).or_default();
            c.sent += 1;
            c.lost_collision += 1;
            if tx.dst.is_none() {
                let id = tx.frame.map_or(0, |f| f.id);
                self.lost.push((id, j, tx.end_ns, LossReason::Busy));
            }
        }
        if detected || rx >= self.cfg.cca_ed_dbm {
            let was_busy = self.busy(j, t);
            self.sta[j as usize].sensed.push(n);
            if !was_busy {
                self.freeze(j, t);
            }
            let p = self.prop_ns(tx.sender, j);
            self.at(tx.end_ns + p, Ev::Leave(n, j));
        } else if self.sta[j as usize].locked == Some(n) {
            let p = self.prop_ns(tx.sender, j);
            self.at(tx.end_ns + p, Ev::Leave(n, j));
        }
    }

    /// Transmission `n` stops reaching station `j`: what it received of it, and its
    /// medium perhaps idle again.
    pub(super) fn leave(&mut self, n: u64, j: u32, t: u64, out: &mut Vec<Outcome>) {
        self.sta[j as usize].sensed.retain(|&x| x != n);
        // (Idle from now, if nothing else holds it: what it received may make it
        // contend, from here.)
        if !self.busy(j, t) {
            self.sta[j as usize].idle_since_ns = t;
        }
        if self.sta[j as usize].locked == Some(n) {
            self.sta[j as usize].locked = None;
            if let Some(&tx) = self.tx(n) {
                self.received(j, &tx, t, out);
            }
        }
        self.became_idle(j, t);
    }

    /// The probability that station `j` received all of `tx` (the interference summed
    /// piece by piece over the frame), 0 if it transmitted meanwhile.
    pub(super) fn success_probability(&self, j: u32, tx: &Tx) -> f64 {
        let overlapping: Vec<&Tx> = self
            .air
            .iter()
            .filter(|u| u.n != tx.n && u.start_ns < tx.end_ns && u.end_ns > tx.start_ns)
            .collect();
        if overlapping.iter().any(|u| u.sender == j) {
            return 0.0;
        }
        let mut cuts: Vec<u64> = vec![tx.start_ns, tx.end_ns];
        for u in &overlapping {
            cuts.extend([u.start_ns.max(tx.start_ns), u.end_ns.min(tx.end_ns)]);
        }
        cuts.sort_unstable();
        cuts.dedup();
        let signal = self.rx_w(tx.sender, j);
        let noise = self.noise_w;
        let dur = (tx.end_ns - tx.start_ns).max(1) as f64;
        let mut p = 1.0;
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            let i: f64 = overlapping
                .iter()
                .filter(|u| u.start_ns <= a && u.end_ns >= b)
                .map(|u| self.rx_w(u.sender, j))
                .sum();
            let bits = (tx.bits as f64 * (b - a) as f64 / dur).ceil() as u64;
            p *= phy::success_rate(tx.mode, signal / (noise + i), bits);
        }
        p
    }

    pub(super) fn received(&mut self, j: u32, tx: &Tx, t: u64, out: &mut Vec<Outcome>) {
        let p = self.success_probability(j, tx);
        let ok = draw(self.cfg.seed, tx.n, u64::from(j), 0x5eed) < p;
        let for_me = tx.dst == Some(j);
        if tx.kind == Kind::Data && tx.dst.is_none_or(|d| d == j) {
            let overlapped = self
                .air
                .iter()
                .any(|u| u.n != tx.n && u.start_ns < tx.end_ns && u.end_ns > tx.start_ns);
            let c = self.pairs.entry((tx.sender, j)).or_default();
            c.sent += 1;
            match (ok, overlapped) {
                (true, _) => c.delivered += 1,
                (false, true) => c.lost_collision += 1,
                (false, false) => c.lost_channel += 1,
            }
            if !ok && tx.dst.is_none() {
                let id = tx.frame.map_or(0, |f| f.id);
                out.push(Outcome::Lost { id, receiver: j, at_ns: t, reason: LossReason::Sinr });
            }
        }
        let answer = for_me && matches!(tx.kind, Kind::Ack | Kind::Cts);
        let st = &mut self.sta[j as usize];
        st.eifs = !ok;
        if !ok {
            st.stats.rx_error += 1;
            // The answer it waited for, garbled: the attempt failed.
            if answer && matches!(st.wait, Wait::Ack | Wait::Cts) {
                st.wait = Wait::None;
                st.wait_gen += 1;
                self.finish(j, false, t, out);
            }
            return;
        }
        st.stats.rx_ok += 1;
        if st.monitor {
            let h = self.heard(j, tx, t, Some(self.rx_dbm(tx.sender, j)));
            out.push(Outcome::Heard(Box::new(h)));
        }
        let st = &mut self.sta[j as usize];
        if !for_me && tx.dst.is_some() {
            // Someone else's exchange: its Duration holds the medium.
            if st.nav_until_ns < t + tx.nav_ns {
                if !self.busy(j, t) {
                    self.freeze(j, t);
                }
                self.sta[j as usize].nav_until_ns = t + tx.nav_ns;
                self.at(t + tx.nav_ns, Ev::NavEnd(j));
            }
            return;
        }
        let sifs = self.cfg.timing.sifs_ns;
        let wait = st.wait;
        match tx.kind {
            Kind::Data => {
                let f = tx.frame.expect("a data frame's");
                let dup = tx.retry && st.last_seq.get(&tx.sender) == Some(&f.seq);
                if !dup {
                    st.last_seq.insert(tx.sender, f.seq);
                    out.push(Outcome::Deliver { id: f.id, receiver: j, at_ns: t });
                }
                if for_me {
                    self.at(t + sifs, Ev::Answer(j, tx.sender, 0, 0));
                }
            }
            Kind::Rts if for_me && st.nav_until_ns <= t => {
                self.at(t + sifs, Ev::Answer(j, tx.sender, tx.nav_ns, 1));
            }
            Kind::Cts if wait == Wait::Cts => {
                st.wait = Wait::None;
                st.wait_gen += 1;
                self.at(t + sifs, Ev::Answer(j, tx.sender, 0, 2));
            }
            Kind::Ack if wait == Wait::Ack => {
                st.wait = Wait::None;
                st.wait_gen += 1;
                self.finish(j, true, t, out);
            }
            _ => {}
        }
    }
}
