"""The course as data: the module table, the project's paths, notebooks and their cells, the
export into the package, the staging of a package for a run. May use tito.sandbox only."""
