//! The rolling tick hash: `h(t) = blake3(h(t-1) ‖ t ‖ line₁ \n ‖ … ‖ lineₙ \n)`.
//!
//! Two runs agree on tick `t` exactly when every event line up to `t` is identical.

/// The next rolling hash after `tick`'s `lines`.
pub fn roll(prev: &[u8; 32], tick: u64, lines: &[String]) -> [u8; 32] {
    let mut roll = Roll::new(prev, tick);
    for line in lines {
        roll.line(line);
    }
    roll.finish()
}

/// [`roll`] a line at a time, for readers that see a tick's lines one by one.
pub struct Roll(blake3::Hasher);

impl Roll {
    /// Starts the hash of `tick`, after the hash `prev` of every tick before it.
    pub fn new(prev: &[u8; 32], tick: u64) -> Self {
        let mut hasher = blake3::Hasher::new();
        hasher.update(prev);
        hasher.update(&tick.to_le_bytes());
        Self(hasher)
    }

    /// The tick's next line (without its newline).
    pub fn line(&mut self, line: &str) {
        self.0.update(line.as_bytes());
        self.0.update(b"\n");
    }

    /// The hash the tick closes with.
    pub fn finish(&self) -> [u8; 32] {
        *self.0.finalize().as_bytes()
    }
}

/// Lowercase hex of a hash.
pub fn hex(hash: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*hash).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_change_changes_the_hash() {
        let a = roll(&[0; 32], 1, &["x".into(), "y".into()]);
        assert_ne!(a, roll(&[0; 32], 1, &["x".into(), "z".into()]));
        assert_ne!(a, roll(&[0; 32], 2, &["x".into(), "y".into()]));
        assert_ne!(a, roll(&[1; 32], 1, &["x".into(), "y".into()]));
        assert_ne!(a, roll(&[0; 32], 1, &["xy".into()]));
        assert_eq!(a, roll(&[0; 32], 1, &["x".into(), "y".into()]));
        assert_eq!(hex(&a).len(), 64);
    }
}
