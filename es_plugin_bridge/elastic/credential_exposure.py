"""What ``es setup`` says when the cluster it stores the sidecar's token in has no security plugin.

ml-commons keeps a connector's credential encrypted in ``.plugins-ml-connector``, but its master key
sits in ``.plugins-ml-config`` of the same cluster (ml-commons ``ml-algorithms/src/main/java/org/
opensearch/ml/engine/encryptor/EncryptorImpl.java``: ``MASTER_KEY`` read from ``ML_CONFIG_INDEX``).
Without the security plugin both are one unauthenticated GET away, so the token is readable by anyone
who reaches the node (issue 48, item 1). The cure is to scope it: this cluster gets a token of its own
(one line of the sidecar's ``--token-file``), so what leaks from it opens the sidecar to nobody else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient

#: The component name ``_cat/plugins`` lists for OpenSearch's security plugin.
SECURITY_PLUGIN = "opensearch-security"


def has_security(client: SearchClient) -> bool | None:
    """Whether any node lists the security plugin (``GET _cat/plugins``); None when that cannot be read."""
    try:  # the opensearch-py client itself (``OpenSearchClient.raw``): _cat has no Elasticsearch twin here
        rows = getattr(client, "raw", client).cat.plugins(format="json")
    except Exception:  # an unreadable answer is no evidence either way: say nothing
        return None
    return any(isinstance(row, dict) and row.get("component") == SECURITY_PLUGIN for row in rows or [])


def unsecured_line(client: SearchClient, cluster: str, token: str | None) -> str | None:
    """One warning line when ``token`` is stored in a cluster without the security plugin, else None."""
    if not token or has_security(client) is not False:
        return None
    return (f"warning: {cluster} has no security plugin: the sidecar token stored in its ml-commons "
            "connectors is readable by anyone who can reach the node; give this cluster its own token "
            "(one line of the sidecar's --token-file)")


__all__ = ["SECURITY_PLUGIN", "has_security", "unsecured_line"]
