//! hearsay's end-to-end suites, one binary (see tests/lib.rs for the helpers).

mod bad_input;
mod chinese;
mod determinism;
mod fish_market;
mod forgetting;
mod llm;
mod postgres;
mod replay;
mod rumour;
mod store_conformance;
