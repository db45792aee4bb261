"""Adds the reference pages generated from the code (`feedctl.manual.reference`) to the site as it builds:
they are never written into `docs/`, so they cannot be edited apart from what they describe."""

from mkdocs.structure.files import File


def on_files(files, config):
    from feedctl.manual.reference import pages

    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files
