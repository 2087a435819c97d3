"""The instructor's side: nbgrader courses, scoring submissions check by check, the gradebook.

Imports go down only: grading may use tito.student, tito.curriculum and tito.sandbox, not tito.cli.
"""
