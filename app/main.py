"""The FastAPI application: routers per resource, settings injected."""

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app import pages
from app.routers import deck, health
from app.settings import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(title="distdeck", version="0.1.0")
    app.state.settings = settings
    pages.install(app, settings)
    app.include_router(health.router)
    app.include_router(deck.router)
    # StaticFiles resolves each path and refuses anything outside static_dir (no traversal).
    app.mount("/static", StaticFiles(directory=settings.static_dir), name="static")
    return app
