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
///
/// Lines are gathered and handed to blake3 64 KiB at a time (`ROLL_BUFFER`), not one by
/// one: blake3 hashes many 1 KiB chunks side by side (SIMD) only when one update holds
/// several of them, and a line is a few hundred bytes, so line by line it hashed a
/// chunk at a time — at 10,000 NPCs a few milliseconds of every tick, on the tick
/// thread. The hash is of the same bytes in the same order, so the same hash.
pub struct Roll {
    hasher: blake3::Hasher,
    gathered: Vec<u8>,
}

/// How many bytes of lines [`Roll`] gathers before hashing them: sixteen chunks, what
/// blake3 hashes at once with AVX-512, four times over.
const ROLL_BUFFER: usize = 64 * 1024;

impl Roll {
    /// Starts the hash of `tick`, after the hash `prev` of every tick before it.
    pub fn new(prev: &[u8; 32], tick: u64) -> Self {
        let mut hasher = blake3::Hasher::new();
        hasher.update(prev);
        hasher.update(&tick.to_le_bytes());
        Self {
            hasher,
            gathered: Vec::new(),
        }
    }

    /// The tick's next line (without its newline).
    pub fn line(&mut self, line: &str) {
        if self.gathered.capacity() == 0 {
            self.gathered.reserve(ROLL_BUFFER + line.len() + 1);
        }
        self.gathered.extend_from_slice(line.as_bytes());
        self.gathered.push(b'\n');
        if self.gathered.len() >= ROLL_BUFFER {
            self.hasher.update(&self.gathered);
            self.gathered.clear();
        }
    }

    /// The hash the tick closes with.
    pub fn finish(&self) -> [u8; 32] {
        let mut hasher = self.hasher.clone();
        hasher.update(&self.gathered);
        *hasher.finalize().as_bytes()
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

    #[test]
    fn gathering_lines_hashes_the_same_bytes() {
        // Lines of many sizes, past the buffer several times over: the hash of the
        // stream as the formula spells it, one update per piece.
        let lines: Vec<String> = (0..3000)
            .map(|i| "é".repeat(i % 7) + &"x".repeat((i * 37) % 400))
            .collect();
        let mut plain = blake3::Hasher::new();
        plain.update(&[7; 32]);
        plain.update(&9u64.to_le_bytes());
        for line in &lines {
            plain.update(line.as_bytes());
            plain.update(b"\n");
        }
        assert_eq!(roll(&[7; 32], 9, &lines), *plain.finalize().as_bytes());
        let mut partial = Roll::new(&[7; 32], 9);
        partial.line("a");
        // Finishing does not consume what was gathered.
        assert_eq!(partial.finish(), partial.finish());
        assert_eq!(partial.finish(), roll(&[7; 32], 9, &["a".into()]));
    }
}
