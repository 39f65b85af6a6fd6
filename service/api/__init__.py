"""HTTP API (Litestar). The app factory lives in `service.api.app`."""
