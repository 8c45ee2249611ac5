"""The web console: plain HTML, JS and CSS in `static/`, shipped as package data (no build step)."""
