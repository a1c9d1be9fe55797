#!/bin/sh
# Install Debian's libjson-smart-java and libjsonpath-java (jars in /usr/share/java) for the OpenSearch
# parser test (tests/test_opensearch_parser.py): the json-smart/json-path parser ml-commons reads the
# sidecar's answers with. Like lucene.sh it never fails CI: where apt, root or the network is missing
# it says why and exits 0, and the test then skips, naming the reason.
set -u

if ls /usr/share/java/json-smart*.jar /usr/share/java/json-path*.jar >/dev/null 2>&1; then
    echo "jsonpath.sh: json-smart and json-path jars already in /usr/share/java"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "jsonpath.sh: apt-get not available; the OpenSearch parser test will be skipped"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "jsonpath.sh: not root and no password-less sudo; the OpenSearch parser test will be skipped"
        exit 0
    fi
fi
PACKAGES="libjson-smart-java libjsonpath-java"
command -v java >/dev/null 2>&1 || PACKAGES="$PACKAGES default-jre-headless"
echo "jsonpath.sh: installing $PACKAGES"
if $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $PACKAGES; then
    echo "jsonpath.sh: installed $PACKAGES"
else
    echo "jsonpath.sh: apt-get could not install $PACKAGES; the OpenSearch parser test will be skipped"
fi
exit 0
