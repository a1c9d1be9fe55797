"""The one Java virtual machine a process may start through jpype, for the checks against real Java.

jpype starts one JVM per process and its class path is fixed then: whichever check starts it first
(the Lucene parity tests, or the OpenSearch parser tests) must put every library of every check on
it, so that all of them run in one pytest process in any order. Each library is a named set of jars
found in ``/usr/share/java`` (Debian's packages) or the directory of its environment variable;
:func:`start_jvm` puts every complete set it finds on the class path. Development only: jpype and
the jars are not dependencies of the sidecar.
"""

from __future__ import annotations

import glob
import os

DEFAULT_JAR_DIR = "/usr/share/java"


class JarSet:
    """Jars that together make one library; ``patterns`` are tried in order for each jar."""

    def __init__(self, name: str, env: str, jars: dict[str, tuple[str, ...]], debian: str) -> None:
        self.name, self.env, self.jars, self.debian = name, env, jars, debian

    @property
    def directory(self) -> str:
        return os.environ.get(self.env, DEFAULT_JAR_DIR)

    def paths(self) -> list[str]:
        """The jar files, one per jar; [] if any is missing."""
        found = []
        for patterns in self.jars.values():
            matches = next((sorted(m) for p in patterns if (m := glob.glob(os.path.join(self.directory, p)))),
                           [])
            if not matches:
                return []
            found.append(matches[-1])
        return found

    def missing_reason(self) -> str | None:
        """Why the set cannot run here (None when it can): no jpype, no jars, or no JVM."""
        try:
            import jpype
        except ImportError:
            return "jpype1 is not installed (pip install jpype1)"
        if not self.paths():
            return (f"{self.name} jars not found in {self.directory} "
                    f"(apt-get install {self.debian}, or set {self.env})")
        if not jpype.isJVMStarted():
            try:
                jpype.getDefaultJVMPath()
            except Exception as exc:  # jpype raises its own JVMNotFoundException
                return f"no Java virtual machine found ({exc})"
        elif _started_with and not set(self.paths()) <= set(_started_with):
            return f"this process's JVM was started without the {self.name} jars"
        return None


#: Debian's liblucene8-java: what Elasticsearch's scoring runs on (tests/test_lucene_*.py).
LUCENE = JarSet("Lucene 8", "LUCENE_JAR_DIR",
                {"core": ("lucene-core-8*.jar", "lucene-core.jar"),
                 "analyzers": ("lucene-analyzers-common-8*.jar", "lucene-analyzers-common.jar")},
                "liblucene8-java")
#: Debian's libjsonpath-java and libjson-smart-java (and their dependencies accessors-smart, asm,
#: slf4j-api): the parser OpenSearch's ml-commons reads a connector's answer with
#: (tests/serving/test_opensearch_parser.py).
JSON_PATH = JarSet("json-path/json-smart", "JSONPATH_JAR_DIR",
                   {"json-path": ("json-path.jar", "json-path-2*.jar"),
                    "json-smart": ("json-smart.jar", "json-smart-2*.jar"),
                    "accessors-smart": ("accessors-smart.jar", "accessors-smart-[0-9]*.jar"),
                    "asm": ("asm.jar", "asm-[0-9]*.jar"),
                    "slf4j-api": ("slf4j-api.jar", "slf4j-api-[0-9]*.jar")},
                   "libjsonpath-java libjson-smart-java")
JAR_SETS = (LUCENE, JSON_PATH)
#: slf4j's no-operation binding when present, so json-path logs nothing to stderr.
_QUIET = ("slf4j-nop.jar",)

_started_with: list[str] = []


def start_jvm() -> None:
    """Start the JVM (once per process) with every jar set found on its class path."""
    import jpype

    if jpype.isJVMStarted():
        return
    classpath = [path for jar_set in JAR_SETS for path in jar_set.paths()]
    if not classpath:
        raise RuntimeError("; ".join(filter(None, (s.missing_reason() for s in JAR_SETS))))
    classpath += [p for name in _QUIET if os.path.exists(p := os.path.join(JSON_PATH.directory, name))]
    _started_with.extend(classpath)
    jpype.startJVM(classpath=classpath, convertStrings=True)
