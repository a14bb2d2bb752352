"""Control-plane service: the REST API over runs and everything they produced."""
