"""Running many episodes: locally side by side, on Ray, validation and the adversarial sweep."""
