//! One simulated Redis server.
