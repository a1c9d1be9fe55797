#!/bin/sh
# Install the Debian jars the Java-backed tests drive through jpype (es_plugin_bridge/jvm.py):
#   liblucene8-java                        Lucene 8: tests/test_lucene_parity.py, tests/test_lucene_es_queries.py
#   libjson-smart-java libjsonpath-java    the parser OpenSearch's ml-commons reads answers with:
#                                          tests/test_opensearch_parser.py
# Only the missing ones are installed, in one apt-get call. It never fails CI: where apt, root or the
# network is missing it says why and exits 0, and those tests then skip, naming the reason.
set -u

NEED=""
ls /usr/share/java/lucene-core*.jar >/dev/null 2>&1 || NEED="$NEED liblucene8-java"
ls /usr/share/java/json-smart*.jar >/dev/null 2>&1 || NEED="$NEED libjson-smart-java"
ls /usr/share/java/json-path*.jar >/dev/null 2>&1 || NEED="$NEED libjsonpath-java"
if [ -z "$NEED" ]; then
    echo "java_jars.sh: Lucene, json-smart and json-path jars already in /usr/share/java"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "java_jars.sh: apt-get not available; the tests that need$NEED will be skipped"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "java_jars.sh: not root and no password-less sudo; the tests that need$NEED will be skipped"
        exit 0
    fi
fi
command -v java >/dev/null 2>&1 || NEED="$NEED default-jre-headless"
echo "java_jars.sh: installing$NEED"
if $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $NEED; then
    echo "java_jars.sh: installed$NEED"
else
    echo "java_jars.sh: apt-get could not install$NEED; the tests that need them will be skipped"
fi
exit 0
