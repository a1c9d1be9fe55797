"""Lay out an OpenSearch home from Maven Central with plain ``mvn``: no distribution archive, no Gradle.

Maven Central serves no OpenSearch distribution, but it serves every piece of one: the server and its
runtime dependencies (``lib/``), each module as a plain jar (``modules/<name>/``, to which this adds
the ``plugin-descriptor.properties`` the distribution's build writes), and the plugins as zips
(``plugins/<name>/``). The home is built in a sibling folder and renamed into place when complete, so
an interrupted assembly never leaves a home that looks finished; a finished one is reused.

Facts this relies on (docs/opensearch.md, "A node without Docker", says how each was checked):

* 2.19.1 is the newest 2.19.x for which all four plugin zips resolve (k-NN, ml-commons and
  neural-search were published for 2.19.1.0 and no later 2.19 patch); every bundle's
  ``opensearch.version`` must equal the server's exactly.
* The server's POM marks ``log4j-core`` optional, so Maven leaves it out; a node cannot log without it.
* A bundle's jars must not repeat a jar of ``lib/`` (OpenSearch's jar-hell check): module folders get
  only the jars the server does not already have.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

SERVER_VERSION = "2.19.1"
PLUGIN_VERSION = f"{SERVER_VERSION}.0"
#: What the distribution's ``lib/`` holds beyond the server's POM: ``log4j-core`` (optional there, and a
#: node cannot log without it) and the class loader that gives a plugin its extended plugins' classes.
SERVER_EXTRAS = ("org.apache.logging.log4j:log4j-core:2.21.0",
                 f"org.opensearch:opensearch-plugin-classloader:{SERVER_VERSION}")
#: Bump when the layout changes, so an older home is rebuilt rather than reused.
LAYOUT_REVISION = 3  # 3: ingest-common (the script processor)


@dataclass(frozen=True)
class Module:
    """A module published as a plain jar: the descriptor fields its ``build.gradle`` gives it."""

    name: str
    artifact: str
    classname: str
    description: str
    extended: tuple[str, ...] = ()


#: The modules the product needs: HTTP, Painless (k-NN extends it; the stored-vector mode scores with
#: it), the analyzers, ``rank_features`` (mapper-extras), reindex, and ingest-common (the ``script``
#: processor: the ingest-embedding pipeline drops a zero vector with it, elastic/opensearch_ingest.py).
#: Classnames from each jar; the ``extended`` of analysis-common and ingest-common because their jars
#: carry a Painless extension (META-INF/services).
MODULES: tuple[Module, ...] = (
    Module("transport-netty4", "transport-netty4-client", "org.opensearch.transport.Netty4Plugin",
           "Netty 4 based transport implementation"),
    Module("lang-painless", "lang-painless", "org.opensearch.painless.PainlessPlugin",
           "An easy, safe and fast scripting language for OpenSearch"),
    Module("analysis-common", "analysis-common", "org.opensearch.analysis.common.CommonAnalysisPlugin",
           "Adds built-in analyzers", ("lang-painless",)),
    Module("mapper-extras", "mapper-extras-client", "org.opensearch.index.mapper.MapperExtrasPlugin",
           "Adds advanced field mappers"),
    Module("reindex", "reindex-client", "org.opensearch.index.reindex.ReindexPlugin",
           "Reindex, update by query and delete by query"),
    Module("ingest-common", "ingest-common", "org.opensearch.ingest.common.IngestCommonPlugin",
           "Module for ingest processors that do not require additional security permissions or have "
           "large dependencies and resources", ("lang-painless",)),
)

#: The plugin zips, in dependency order: ml-commons extends job-scheduler, neural-search extends k-NN.
PLUGINS: tuple[str, ...] = ("opensearch-job-scheduler", "opensearch-knn", "opensearch-ml-plugin",
                            "neural-search")


class AssemblyError(RuntimeError):
    """Maven or Java is missing, or a piece did not resolve; the message says which."""


def default_home(root: Path) -> Path:
    """Where the project keeps its home: ``build/`` is git-ignored."""
    return root / "build" / "opensearch" / f"opensearch-{SERVER_VERSION}"


def missing_tools() -> list[str]:
    """The tools assembly and start need that this machine lacks (``[]`` when both are there)."""
    return [tool for tool in ("mvn", "java", "javac") if shutil.which(tool) is None]


def is_assembled(home: Path) -> bool:
    stamp = home / ".esrerank-layout.json"
    if not stamp.is_file():
        return False
    return json.loads(stamp.read_text()) == _stamp()


def _stamp() -> dict[str, object]:
    return {"server": SERVER_VERSION, "plugins": list(PLUGINS), "modules": [m.name for m in MODULES],
            "extras": list(SERVER_EXTRAS),
            "revision": LAYOUT_REVISION}


def assemble(home: Path, *, log=print) -> Path:
    """Build ``home`` unless a finished one is there; returns it. Raises :class:`AssemblyError`."""
    if is_assembled(home):
        _compile_launcher(home)  # a no-op unless Launcher.java changed since the home was laid out
        return home
    if missing := missing_tools():
        raise AssemblyError(f"cannot assemble an OpenSearch node: {', '.join(missing)} not found on PATH")
    home.parent.mkdir(parents=True, exist_ok=True)
    partial = home.with_name(home.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    log(f"assembling OpenSearch {SERVER_VERSION} from Maven Central into {home}")
    lib = partial / "lib"
    _copy_dependencies([f"org.opensearch:opensearch:{SERVER_VERSION}", *SERVER_EXTRAS], lib)
    server_jars = {_artifact_name(p.name) for p in lib.glob("*.jar")}
    for module in MODULES:
        log(f"  module {module.name}")
        folder = partial / "modules" / module.name
        _copy_dependencies([f"org.opensearch.plugin:{module.artifact}:{SERVER_VERSION}"], folder)
        for jar in folder.glob("*.jar"):
            if _artifact_name(jar.name) in server_jars:
                jar.unlink()
        _write_descriptor(folder, module)
    for plugin in PLUGINS:
        log(f"  plugin {plugin}")
        _unpack_plugin(plugin, partial / "plugins")
    (partial / "config").mkdir()
    _compile_launcher(partial)
    (partial / ".esrerank-layout.json").write_text(json.dumps(_stamp()))
    shutil.rmtree(home, ignore_errors=True)
    partial.rename(home)
    log(f"OpenSearch home ready: {home}")
    return home


def _artifact_name(jar: str) -> str:
    """``netty-codec-4.1.118.Final.jar`` → ``netty-codec``: the name without its version."""
    stem = jar.removesuffix(".jar")
    parts = stem.split("-")
    for i, part in enumerate(parts):
        if part[:1].isdigit():
            return "-".join(parts[:i])
    return stem


def _mvn(args: list[str], cwd: Path) -> None:
    command = ["mvn", "-q", "-B", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise AssemblyError(f"{' '.join(command)} failed (exit {done.returncode}):\n{tail}")


def _copy_dependencies(coordinates: list[str], out: Path) -> None:
    """The artifacts and their runtime dependencies, as jars in ``out`` (a throwaway POM per call)."""
    out.mkdir(parents=True, exist_ok=True)
    deps = "".join(
        "<dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"
        .format(*c.split(":")) for c in coordinates)
    pom = ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
           "<groupId>esrerank</groupId><artifactId>opensearch-node-piece</artifactId><version>1</version>"
           f"<dependencies>{deps}</dependencies></project>")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pom.xml").write_text(pom)
        _mvn(["dependency:copy-dependencies", f"-DoutputDirectory={out}", "-DincludeScope=runtime"],
             Path(tmp))


def _write_descriptor(folder: Path, module: Module) -> None:
    """The ``plugin-descriptor.properties`` OpenSearch's PluginsService reads for every bundle."""
    (folder / "plugin-descriptor.properties").write_text(
        f"description={module.description}\nversion={SERVER_VERSION}\nname={module.name}\n"
        f"classname={module.classname}\njava.version=11\nopensearch.version={SERVER_VERSION}\n"
        f"extended.plugins={','.join(module.extended)}\nhas.native.controller=false\n")


def _unpack_plugin(plugin: str, plugins: Path) -> None:
    """Fetch the plugin's zip (Maven's local repository keeps it) and unpack it into its own folder,
    named as its descriptor names it, the way ``opensearch-plugin install`` does."""
    with tempfile.TemporaryDirectory() as tmp:
        _mvn(["dependency:copy", f"-Dartifact=org.opensearch.plugin:{plugin}:{PLUGIN_VERSION}:zip",
              f"-DoutputDirectory={tmp}"], Path(tmp))
        archive = Path(tmp) / f"{plugin}-{PLUGIN_VERSION}.zip"
        with zipfile.ZipFile(archive) as zf:
            descriptor = dict(
                line.split("=", 1) for line in zf.read("plugin-descriptor.properties").decode().splitlines()
                if "=" in line and not line.startswith("#"))
            if descriptor.get("opensearch.version") != SERVER_VERSION:
                raise AssemblyError(f"{plugin} {PLUGIN_VERSION} is built for OpenSearch "
                                    f"{descriptor.get('opensearch.version')}, not {SERVER_VERSION}")
            target = plugins / (descriptor.get("custom.foldername") or descriptor["name"])
            zf.extractall(target)


def _compile_launcher(home: Path) -> None:
    """Compile ``Launcher.java`` against the server's jars into ``HOME/launcher``, again whenever the
    source changed (its hash is kept beside the classes): a home laid out before a launcher change gets
    the new launcher without being laid out anew. The classes are swapped in whole."""
    source = Path(__file__).with_name("Launcher.java")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    out = home / "launcher"
    if (out / ".source-sha256").is_file() and (out / ".source-sha256").read_text() == digest:
        return
    fresh = home / "launcher.new"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir()
    done = subprocess.run(["javac", "--release", "11", "-d", str(fresh), "-cp",
                           os.path.join(home, "lib", "*"), str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssemblyError(f"javac Launcher.java failed:\n{done.stderr[-2000:]}")
    (fresh / ".source-sha256").write_text(digest)
    stale = home / "launcher.old"
    shutil.rmtree(stale, ignore_errors=True)
    if out.exists():
        out.rename(stale)
    fresh.rename(out)
    shutil.rmtree(stale, ignore_errors=True)
