//! hearsay's end-to-end suites, one binary (see tests/lib.rs for the helpers).

mod ask;
mod bad_input;
mod bad_rundir;
mod bench;
mod bounds;
mod chinese;
mod determinism;
mod expect;
mod faults;
mod fish_market;
mod forgetting;
mod fuzz;
mod llm;
mod mcp;
mod overrides;
mod postgres;
mod providers;
mod replay;
mod report;
mod rumour;
mod safety;
mod secrets;
mod spaces;
mod store_conformance;
mod trust;
mod watch;
