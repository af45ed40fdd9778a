"""The sweep file and its points: the spec's models, how a spec expands into points, and the point itself."""
