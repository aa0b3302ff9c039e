"""The hostile-input suite (issue 14 item 7): a corpus of bad files, command lines and cache states run through the
CLI, and a spec fuzzer."""
