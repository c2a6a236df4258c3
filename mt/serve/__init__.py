"""`mt serve`: LibreTranslate's API, mt's own, and the page, with batching across requests."""
