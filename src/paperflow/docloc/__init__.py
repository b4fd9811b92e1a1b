"""docloc: progressive evidence localisation for document VQA as a JKO flow (spec doc_localization.md).

Groundwork, not yet a study (no stages.py, no rules): the entropic JKO solver (`jko`), the DocVQA-format
generator and loader (`data`), and the localisation/answer metrics (`evaluate`), each tested. See README.md.
"""
