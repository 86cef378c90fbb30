//! The rolling tick hash: `h(t) = blake3(h(t-1) ‖ t ‖ line₁ \n ‖ … ‖ lineₙ \n)`.
//!
//! Two runs agree on tick `t` exactly when every event line up to `t` is identical.

/// The next rolling hash after `tick`'s `lines`.
pub fn roll(prev: &[u8; 32], tick: u64, lines: &[String]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(prev);
    hasher.update(&tick.to_le_bytes());
    for line in lines {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    *hasher.finalize().as_bytes()
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
