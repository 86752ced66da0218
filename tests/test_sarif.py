"""`check --format sarif` against the SARIF 2.1.0 structure and GitHub code scanning's
ingestion requirements, checked offline.

The schema below is written from the SARIF 2.1.0 specification (OASIS; the JSON schema
``sarif-schema-2.1.0.json`` and its prose) for the objects citegraph emits: each object's
required properties, its closed property set (the specification's objects allow no other
property — extra data goes into ``properties`` bags), the ``level`` enumeration, positive
line numbers, and the prose rule that a message holds ``text`` or ``id``. GitHub's page
"SARIF support for code scanning" adds: ``$schema``, ``tool.driver.rules``, each rule's
``shortDescription``/``fullDescription``/``help`` text, and per result ``ruleId``,
``message.text``, 1–10 ``locations`` with ``artifactLocation.uri`` (relative to the
repository root) and ``region.startLine``, and ``partialFingerprints``.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from test_check import world  # noqa: F401  (the module fixture: a PR-shaped change)

from citegraph.memory.review import check as chk
from citegraph.memory.review import check_formats

LEVEL = {"enum": ["none", "note", "warning", "error"]}
BAG = {"type": "object"}
MMS = {"type": "object", "required": ["text"], "additionalProperties": False,
       "properties": {"text": {"type": "string"}, "markdown": {"type": "string"}, "properties": BAG}}


def closed(props: dict, required: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> dict:
    """An object with the specification's property names (``names`` typed loosely)."""
    allp = {**{n: {} for n in names}, **props}
    return {"type": "object", "additionalProperties": False, "required": list(required), "properties": allp}


SPEC = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": {
        "message": {**closed({"text": {"type": "string"}, "markdown": {"type": "string"}, "id": {"type": "string"},
                              "arguments": {"type": "array", "items": {"type": "string"}}, "properties": BAG}),
                    "anyOf": [{"required": ["text"]}, {"required": ["id"]}]},
        "region": closed({"startLine": {"type": "integer", "minimum": 1},
                          "startColumn": {"type": "integer", "minimum": 1},
                          "endLine": {"type": "integer", "minimum": 1},
                          "endColumn": {"type": "integer", "minimum": 1}, "properties": BAG},
                         names=("charOffset", "charLength", "byteOffset", "byteLength", "snippet", "message",
                                "sourceLanguage")),
        "artifactLocation": closed({"uri": {"type": "string"}, "uriBaseId": {"type": "string"},
                                    "index": {"type": "integer", "minimum": -1}, "properties": BAG},
                                   names=("description",)),
        "physicalLocation": {**closed({"artifactLocation": {"$ref": "#/definitions/artifactLocation"},
                                       "region": {"$ref": "#/definitions/region"},
                                       "contextRegion": {"$ref": "#/definitions/region"}, "properties": BAG},
                                      names=("address",)),
                             "anyOf": [{"required": ["artifactLocation"]}, {"required": ["address"]}]},
        "location": closed({"physicalLocation": {"$ref": "#/definitions/physicalLocation"},
                            "message": {"$ref": "#/definitions/message"}, "properties": BAG},
                           names=("id", "logicalLocations", "annotations", "relationships")),
        "reportingConfiguration": closed({"enabled": {"type": "boolean"}, "level": LEVEL,
                                          "rank": {"type": "number", "minimum": -1}, "parameters": BAG,
                                          "properties": BAG}),
        "reportingDescriptor": closed({"id": {"type": "string"}, "name": {"type": "string"},
                                       "shortDescription": MMS, "fullDescription": MMS, "help": MMS,
                                       "defaultConfiguration": {"$ref": "#/definitions/reportingConfiguration"},
                                       "helpUri": {"type": "string"}, "properties": BAG},
                                      ("id",), ("deprecatedIds", "guid", "deprecatedGuids", "deprecatedNames",
                                                "messageStrings", "relationships")),
        "toolComponent": closed({"name": {"type": "string"}, "version": {"type": "string"},
                                 "semanticVersion": {"type": "string"},
                                 "rules": {"type": "array", "items": {"$ref": "#/definitions/reportingDescriptor"}},
                                 "properties": BAG},
                                ("name",), ("guid", "organization", "product", "productSuite", "shortDescription",
                                            "fullDescription", "fullName", "dottedQuadFileVersion", "releaseDateUtc",
                                            "downloadUri", "informationUri", "globalMessageStrings", "notifications",
                                            "taxa", "locations", "language", "contents", "isComprehensive",
                                            "localizedDataSemanticVersion",
                                            "minimumRequiredLocalizedDataSemanticVersion", "associatedComponent",
                                            "translationMetadata", "supportedTaxonomies")),
        "notification": closed({"message": {"$ref": "#/definitions/message"}, "level": LEVEL, "properties": BAG},
                               ("message",), ("locations", "threadId", "timeUtc", "exception", "descriptor",
                                              "associatedRule")),
        "invocation": closed({"executionSuccessful": {"type": "boolean"}, "exitCode": {"type": "integer"},
                              "toolExecutionNotifications": {"type": "array",
                                                             "items": {"$ref": "#/definitions/notification"}},
                              "properties": BAG},
                             ("executionSuccessful",),
                             ("commandLine", "arguments", "responseFiles", "startTimeUtc", "endTimeUtc",
                              "ruleConfigurationOverrides", "notificationConfigurationOverrides",
                              "toolConfigurationNotifications", "exitCodeDescription", "exitSignalName",
                              "exitSignalNumber", "processStartFailureMessage", "machine", "account", "processId",
                              "executableLocation", "workingDirectory", "environmentVariables", "stdin", "stdout",
                              "stderr", "stdoutStderr")),
        "result": closed({"ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": -1},
                          "level": LEVEL, "message": {"$ref": "#/definitions/message"},
                          "locations": {"type": "array", "items": {"$ref": "#/definitions/location"}},
                          "partialFingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
                          "fingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
                          "baselineState": {"enum": ["new", "unchanged", "updated", "absent"]},
                          "properties": BAG},
                         ("message",), ("rule", "kind", "analysisTarget", "guid", "correlationGuid",
                                        "occurrenceCount", "stacks", "codeFlows", "graphs", "graphTraversals",
                                        "relatedLocations", "suppressions", "rank", "attachments", "hostedViewerUri",
                                        "workItemUris", "provenance", "fixes", "taxa", "webRequest", "webResponse")),
        "versionControlDetails": closed({"repositoryUri": {"type": "string"}, "revisionId": {"type": "string"},
                                         "branch": {"type": "string"}, "properties": BAG},
                                        ("repositoryUri",), ("revisionTag", "asOfTimeUtc", "mappedTo")),
        "run": closed({"tool": closed({"driver": {"$ref": "#/definitions/toolComponent"}, "properties": BAG},
                                      ("driver",), ("extensions",)),
                       "invocations": {"type": "array", "items": {"$ref": "#/definitions/invocation"}},
                       "versionControlProvenance": {"type": "array",
                                                    "items": {"$ref": "#/definitions/versionControlDetails"}},
                       "results": {"type": "array", "items": {"$ref": "#/definitions/result"}},
                       "automationDetails": closed({"id": {"type": "string"}, "properties": BAG}, (),
                                                   ("description", "guid", "correlationGuid")),
                       "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
                       "properties": BAG},
                      ("tool",), ("conversion", "language", "originalUriBaseIds", "artifacts", "logicalLocations",
                                  "graphs", "runAggregates", "baselineGuid", "redactionTokens", "defaultEncoding",
                                  "defaultSourceLanguage", "newlineSequences", "externalPropertyFileReferences",
                                  "threadFlowLocations", "taxonomies", "addresses", "translations", "policies",
                                  "webRequests", "webResponses", "specialLocations")),
    },
    **closed({"$schema": {"type": "string"}, "version": {"enum": ["2.1.0"]},
              "runs": {"type": "array", "items": {"$ref": "#/definitions/run"}}, "properties": BAG},
             ("version", "runs"), ("inlineExternalProperties",)),
}

NONEMPTY = {"type": "string", "minLength": 1}
GITHUB = {  # what code scanning requires on top (its "required" column; empty strings not allowed)
    "type": "object", "required": ["$schema", "version", "runs"],
    "properties": {"runs": {"type": "array", "minItems": 1, "maxItems": 20, "items": {
        "type": "object", "required": ["tool", "results"],
        "properties": {
            "tool": {"required": ["driver"], "properties": {"driver": {
                "required": ["name", "rules"], "properties": {"name": NONEMPTY, "rules": {"items": {
                    "required": ["id", "shortDescription", "fullDescription", "help"],
                    "properties": {"id": NONEMPTY, "shortDescription": {"properties": {"text": NONEMPTY}},
                                   "fullDescription": {"properties": {"text": NONEMPTY}},
                                   "help": {"properties": {"text": NONEMPTY}}}}}}}}},
            "results": {"maxItems": 25000, "items": {
                "required": ["ruleId", "message", "locations", "partialFingerprints"],
                "properties": {
                    "ruleId": NONEMPTY, "message": {"required": ["text"], "properties": {"text": NONEMPTY}},
                    "partialFingerprints": {"minProperties": 1},
                    "locations": {"minItems": 1, "maxItems": 10, "items": {
                        "required": ["physicalLocation"], "properties": {"physicalLocation": {
                            "required": ["artifactLocation", "region"],
                            "properties": {
                                "artifactLocation": {"required": ["uri"], "properties": {"uri": {
                                    "type": "string", "minLength": 1, "pattern": "^(?![a-zA-Z][a-zA-Z0-9+.-]*:)(?!/)"}}},
                                "region": {"required": ["startLine", "startColumn", "endLine", "endColumn"]}}}}}}}}}}}}},
}


def validate(doc: dict) -> None:
    jsonschema.Draft7Validator(SPEC).validate(doc)
    jsonschema.Draft7Validator(GITHUB).validate(doc)


def test_the_schemas_themselves_are_valid():
    jsonschema.Draft7Validator.check_schema(SPEC)
    jsonschema.Draft7Validator.check_schema(GITHUB)


def test_check_sarif_meets_sarif_2_1_0_and_github(world):  # noqa: F811
    rep = chk.run_check(world.home, base="main", head="pr", repo_path=world.repo.root)
    doc = json.loads(json.dumps(check_formats.to_sarif(rep)))
    validate(doc)
    run = doc["runs"][0]
    assert {r["ruleId"] for r in run["results"]} == {"citegraph/changed", "citegraph/deleted", "citegraph/relocated"}
    rules = {r["id"]: r["defaultConfiguration"]["level"] for r in run["tool"]["driver"]["rules"]}
    assert rules == {"citegraph/changed": "error", "citegraph/deleted": "error", "citegraph/relocated": "warning",
                     "citegraph/unknown": "note", "citegraph/dependency-changed": "warning"}
    for res in run["results"]:
        assert res["level"] == rules[res["ruleId"]]
        assert len(res["partialFingerprints"]["primaryLocationLineHash"]) == 34
    clean = chk.run_check(world.home, base="main", head="unrelated", repo_path=world.repo.root)
    validate(check_formats.to_sarif(clean))
    unknown = chk.run_check(world.home, base="f" * 40, head="pr", repo_path=world.repo.root)
    doc = check_formats.to_sarif(unknown)
    validate(doc)
    assert doc["runs"][0]["invocations"][0]["executionSuccessful"] is False


@pytest.mark.parametrize("breakage", [
    lambda d: d["runs"][0]["results"][0]["message"].pop("text"),
    lambda d: d["runs"][0]["results"][0].pop("locations"),
    lambda d: d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(startLine=0),
    lambda d: d["runs"][0]["results"][0].update(level="fatal"),
    lambda d: d["runs"][0]["results"][0].update(memory="not a SARIF property"),
    lambda d: d["runs"][0]["tool"]["driver"]["rules"][0].pop("id"),
    lambda d: d["runs"][0]["tool"]["driver"].pop("name"),
    lambda d: d.update(version="2.0.0"),
    lambda d: d["runs"][0]["invocations"][0].pop("executionSuccessful"),
    lambda d: d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"].update(
        uri="file:///abs/path.py"),
    lambda d: d["runs"][0]["results"][0].pop("partialFingerprints"),
    lambda d: d["runs"][0]["tool"]["driver"]["rules"][1]["help"].update(text=""),
])
def test_the_check_rejects_what_either_would_refuse(world, breakage):  # noqa: F811
    good = check_formats.to_sarif(chk.run_check(world.home, base="main", head="pr", repo_path=world.repo.root))
    bad = copy.deepcopy(good)
    breakage(bad)
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
