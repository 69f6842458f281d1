"""distdeck's web layer: FastAPI routers, settings and the CLI. Imports simulations' public API only."""
