"""docloc: progressive evidence localisation for document VQA as a JKO flow (spec doc_localization.md).

A study on the stage contract (`stages.py`, `rules/docloc.smk`): the entropic JKO solver (`jko`), the
DocVQA-format generator and loader (`data`), the potential network and the five arms (`model`,
`train`), the fixed-potential rerun (`mechanics`), metrics (`evaluate`) and claims (`report`). README.md.
"""
