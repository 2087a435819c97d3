"""tinytorch: a deep-learning framework built in numpy, one course module at a time.

Each file under this package is generated from modules/ by `tito module export`, except the
package `__init__` files, which only name what lives where and import nothing eagerly, so that
`import tinytorch` works at every stage of the course.
"""

__version__ = "0.1.0"
