"""The FastAPI application: routers per resource, settings injected."""

from fastapi import FastAPI

from app.routers import health
from app.settings import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(title="distdeck", version="0.1.0")
    app.state.settings = settings
    app.include_router(health.router)
    return app
