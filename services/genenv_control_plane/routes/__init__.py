"""Control-plane routers: thin functions over genenv.db.repositories."""
