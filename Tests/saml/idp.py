"""A SAML 2.0 identity provider for the SAML service provider tests, built on pysaml2 (which signs and encrypts
through the xmlsec1 binary) and lxml.

Usage: idp.py

Binds a TCP port on 127.0.0.1 (one the system picks), prints "READY <port>", and serves HTTP until its standard input
closes (so a test runner that dies takes it along). At start it makes an RSA-2048 key and a self-signed certificate in
a temporary folder. Its entity id is http://127.0.0.1:<port>/metadata.

    GET  /metadata        the IdP's metadata: IDPSSODescriptor, a signing KeyDescriptor with the certificate,
                          NameIDFormat emailAddress and persistent, SingleSignOnService HTTP-Redirect at /sso/redirect
    GET  /certificate     the signing certificate, PEM
    POST /sp              body: an SP's metadata XML. Registers (or replaces) that SP, keyed by its entityID: its
                          HTTP-POST AssertionConsumerService URLs and, if any, its encryption certificate (a
                          KeyDescriptor use="encryption", or one without "use"). 204.
    POST /next            body: JSON, the shape of the NEXT response (204):
                            {"mode": "signed-assertion",            one of MODES below, default "signed-assertion"
                             "name_id": "user@acme.example",        default: unchanged (initially user@acme.example)
                             "name_id_format": "email",             "email" or "persistent"; default: unchanged
                             "attributes": {"email": ["..."], "name": ["..."]},
                                                                    default: unchanged if name_id is unchanged,
                                                                    else {"email": [name_id]} (email format) or {}
                             "evil_name_id": "attacker@acme.example",  the name the attack modes inject
                             "audience": "...",                     overrides the Audience
                             "recipient": "...",                    overrides Response Destination and
                                                                    SubjectConfirmationData Recipient (the form
                                                                    still posts to the real ACS URL)
                             "in_response_to": "..." or null}       overrides InResponseTo (null: leave it out)
                          name_id, name_id_format and attributes stick; the rest applies to one response only, after
                          which the mode is "signed-assertion" again.
    GET  /sso/redirect?SAMLRequest=...&RelayState=...
                          HTTP-Redirect binding. pysaml2 decodes and parses the AuthnRequest (a signature, if the SP
                          sent one, is neither required nor checked). The SP must be registered; the request's
                          AssertionConsumerServiceURL, if present, must be one of its registered ones (else 400).
                          Answers the response as an auto-submitting HTML form (POST to the ACS URL, hidden
                          SAMLResponse and RelayState), or, with "Accept: application/json",
                          {"acs_url": ..., "SAMLResponse": <base64>, "RelayState": ...}.
    GET  /sso/initiate?sp=<entity id>&RelayState=...
                          An IdP-initiated (unsolicited) response, without InResponseTo, answered the same way.

Every response is for the registered SP: Audience = its entity id, Destination and Recipient = the ACS URL,
Conditions and SubjectConfirmationData NotOnOrAfter 5 minutes ahead, signatures RSA-SHA256 / SHA-256 digest, exclusive
c14n, the certificate in KeyInfo. MODES:

    signed-assertion       (default) assertion signed, Response unsigned
    signed-response        Response signed, assertion unsigned
    signed-both            assertion signed, then Response signed
    encrypted-assertion    assertion signed, encrypted to the SP's encryption certificate (EncryptedAssertion), then
                           the Response signed. Encryption: EncryptedData aes256-cbc
                           (http://www.w3.org/2001/04/xmlenc#aes256-cbc), EncryptedKey rsa-oaep-mgf1p
                           (http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p, SHA-1 digest and MGF1-SHA1, the xmlsec1
                           defaults), done by xmlsec1 through pysaml2
    unsigned               nothing signed
    wrong-audience         Audience https://other.example/sp (assertion signed)
    expired                Conditions NotBefore 20 minutes ago, Conditions and SubjectConfirmationData NotOnOrAfter 10
                           minutes ago (assertion signed)
    comment-injection      NameID text "<name_id><!---->.evil.example", assertion signed: exclusive c14n without
                           comments drops the comment, so the IdP has validly signed "<name_id>.evil.example"; an SP
                           reading only the first text node sees "<name_id>"
    sha1                   assertion signed with rsa-sha1 and a sha1 digest
    wrong-issuer           the assertion's Issuer is https://other-idp.example/metadata (assertion signed, same key)
    status-failure         StatusCode Responder / sub-status AuthnFailed, a StatusMessage, no assertion (Response
                           signed)
    tampered-assertion     Response signed, then the assertion's NameID changed to evil_name_id (signature invalid)
    unsigned-assertion-in-signed-envelope
                           the Response carries a cryptographically valid ds:Signature by the IdP's key, but its
                           Reference points at a ds:Object (Id "_envelope_object") inside that Signature, not at the
                           Response; the only assertion is unsigned and names evil_name_id
    duplicate-id           the signed assertion plus, before it, an unsigned evil copy with the SAME ID
    doctype                a valid signed-assertion response preceded by a DOCTYPE declaring (not referencing) a small
                           billion-laughs and an external entity; the signature still verifies with xmlsec1, so only
                           a DOCTYPE refusal stops it (referencing an entity would break xmlsec1's verification)
    xsw1 ... xsw8          XML Signature wrapping after SAML Raider / Somorovsky et al.; see attacks.py for each
                           layout. xsw1 and xsw2 start from a signed Response, xsw3 ... xsw8 from a signed assertion;
                           the injected assertion names evil_name_id (default attacker@acme.example), the evil copies
                           have IDs _evil_response_ID / _evil_assertion_ID, and nothing is re-signed.
"""

import base64
import copy
import datetime
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from lxml import etree
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT, saml
from saml2.config import IdPConfig
from saml2.mdstore import MetadataStore
from saml2.metadata import create_metadata_string
from saml2.saml import NAMEID_FORMAT_EMAILADDRESS, NAMEID_FORMAT_PERSISTENT
from saml2.server import Server
from saml2.sigver import ASSERT_XPATH, RSA_OAEP_MGF1P, pre_encryption_part, pre_signature_part
from saml2.xmldsig import DIGEST_SHA1, DIGEST_SHA256, SIG_RSA_SHA1, SIG_RSA_SHA256

import attacks
from attacks import DS, NS, SAML, SAMLP

XMLSEC1 = "/usr/bin/xmlsec1"
MD = "urn:oasis:names:tc:SAML:2.0:metadata"
XS = "http://www.w3.org/2001/XMLSchema"
AES256_CBC = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"
EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
PASSWORD_PROTECTED_TRANSPORT = "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"
ATTRNAME_FORMAT_BASIC = "urn:oasis:names:tc:SAML:2.0:attrname-format:basic"
RESPONSE_NODE = f"{SAMLP}:Response"  # xmlsec1 --id-attr node names
ASSERTION_NODE = f"{SAML}:Assertion"

NAME_ID_FORMATS = {"email": NAMEID_FORMAT_EMAILADDRESS, "persistent": NAMEID_FORMAT_PERSISTENT}
DEFAULT_MODE = "signed-assertion"
DEFAULT_EVIL_NAME_ID = "attacker@acme.example"
MODES = [
    "signed-assertion", "signed-response", "signed-both", "encrypted-assertion", "unsigned", "wrong-audience",
    "expired", "comment-injection", "sha1", "wrong-issuer", "status-failure", "tampered-assertion",
    "unsigned-assertion-in-signed-envelope", "duplicate-id", "doctype", *attacks.XSW,
]
# What each plain mode signs: (assertion, response).
SIGNING = {
    "signed-assertion": (True, False), "signed-response": (False, True), "signed-both": (True, True),
    "encrypted-assertion": (True, True), "unsigned": (False, False), "status-failure": (False, True),
    "tampered-assertion": (False, True), "unsigned-assertion-in-signed-envelope": (False, False),
    **{mode: (mode not in attacks.XSW_SIGNS_RESPONSE, mode in attacks.XSW_SIGNS_RESPONSE) for mode in attacks.XSW},
}


class RequestError(Exception):
    """A bad request from the test or the SP: answered 400 with the message."""


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def saml_time(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_key_and_certificate(folder):
    """An RSA-2048 key and a self-signed certificate (valid from yesterday for a year), as PEM files in folder."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Gatehouse test SAML IdP")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now_utc() - datetime.timedelta(days=1))
        .not_valid_after(now_utc() + datetime.timedelta(days=365))
        .sign(key, hashes.SHA256())
    )
    key_file, cert_file = os.path.join(folder, "idp-key.pem"), os.path.join(folder, "idp-cert.pem")
    with open(key_file, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    with open(cert_file, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return key_file, cert_file


def pem_from_base64(der_base64):
    body = "".join(der_base64.split())
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


def parse_xml(text):
    parser = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=False)
    return etree.fromstring(text.encode() if isinstance(text, str) else text, parser)


def to_string(root):
    return etree.tostring(root, encoding="unicode")


class IdP:
    """The IdP's state (registered SPs, the next response's shape) and the building of responses."""

    def __init__(self, port, folder):
        self.base = f"http://127.0.0.1:{port}"
        self.entity_id = f"{self.base}/metadata"
        self.folder = folder
        self.key_file, self.cert_file = make_key_and_certificate(folder)
        with open(self.cert_file) as f:
            self.cert_pem = f.read()
        self.cert_base64 = "".join(line for line in self.cert_pem.splitlines() if "-----" not in line)
        config = IdPConfig()
        config.load({
            "entityid": self.entity_id,
            "xmlsec_binary": XMLSEC1,
            "key_file": self.key_file,
            "cert_file": self.cert_file,
            "service": {"idp": {
                "name": "Gatehouse test IdP",
                "endpoints": {"single_sign_on_service": [(f"{self.base}/sso/redirect", BINDING_HTTP_REDIRECT)]},
                "name_id_format": [NAMEID_FORMAT_EMAILADDRESS, NAMEID_FORMAT_PERSISTENT],
                "want_authn_requests_signed": False,
                "policy": {"default": {"lifetime": {"minutes": 5}}},
            }},
        })
        config.metadata = MetadataStore(config.attribute_converters, config)  # SPs get added by POST /sp
        self.server = Server(config=config)
        self.metadata_xml = self.make_metadata(config)
        self.lock = threading.Lock()
        self.sps = {}  # entity id -> {"acs_urls": [...], "encryption_cert_file": path or None, "md_key": ...}
        self.identity = {"name_id": "user@acme.example", "name_id_format": "email",
                         "attributes": {"email": ["user@acme.example"]}}
        self.next_shape = {}

    @staticmethod
    def make_metadata(config):
        """pysaml2's metadata for the IdP, minus the algorithm-support Extensions it adds (md5 and all)."""
        root = parse_xml(create_metadata_string(None, config=config, valid=None))
        for extensions in root.findall(f"{{{MD}}}Extensions"):
            root.remove(extensions)
        return etree.tostring(root, xml_declaration=True, encoding="UTF-8")

    # --- state ----------------------------------------------------------------------------------------------------

    def register_sp(self, metadata_xml):
        try:
            root = parse_xml(metadata_xml)
        except etree.XMLSyntaxError as e:
            raise RequestError(f"SP metadata is not XML: {e}") from e
        if root.tag != f"{{{MD}}}EntityDescriptor" or not root.get("entityID"):
            raise RequestError("SP metadata must be an md:EntityDescriptor with an entityID")
        sp_sso = root.find(f"{{{MD}}}SPSSODescriptor")
        if sp_sso is None:
            raise RequestError("SP metadata has no SPSSODescriptor")
        entity_id = root.get("entityID")
        services = [acs for acs in sp_sso.findall(f"{{{MD}}}AssertionConsumerService")
                    if acs.get("Binding") == BINDING_HTTP_POST]
        if not services:
            raise RequestError("SP metadata has no HTTP-POST AssertionConsumerService")
        # The default one first: isDefault="true", else the lowest index, else document order.
        services.sort(key=lambda acs: (acs.get("isDefault") != "true", int(acs.get("index") or 0)))
        encryption_cert_file = None
        for descriptor in sp_sso.findall(f"{{{MD}}}KeyDescriptor"):
            certificate = descriptor.find(f"{{{DS}}}KeyInfo/{{{DS}}}X509Data/{{{DS}}}X509Certificate")
            if descriptor.get("use") in (None, "encryption") and certificate is not None:
                encryption_cert_file = os.path.join(self.folder, f"sp-enc-{abs(hash(entity_id))}.pem")
                with open(encryption_cert_file, "w") as f:
                    f.write(pem_from_base64(certificate.text))
                break
        with self.lock:
            store = self.server.metadata
            old = self.sps.get(entity_id)
            if old is not None:
                del store.metadata[old["md_key"]]
            store.load("inline", metadata_xml.decode() if isinstance(metadata_xml, bytes) else metadata_xml)
            self.sps[entity_id] = {"acs_urls": [acs.get("Location") for acs in services],
                                   "encryption_cert_file": encryption_cert_file, "md_key": store.ii}

    def set_next(self, shape):
        mode = shape.get("mode", DEFAULT_MODE)
        if mode not in MODES:
            raise RequestError(f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
        name_id_format = shape.get("name_id_format")
        if name_id_format is not None and name_id_format not in NAME_ID_FORMATS:
            raise RequestError("name_id_format must be 'email' or 'persistent'")
        with self.lock:
            identity = self.identity
            if "name_id" in shape and shape["name_id"] != identity["name_id"]:
                identity["name_id"] = shape["name_id"]
                identity["attributes"] = None  # recomputed below unless given
            if name_id_format is not None:
                identity["name_id_format"] = name_id_format
            if "attributes" in shape:
                identity["attributes"] = {k: list(v) for k, v in shape["attributes"].items()}
            if identity["attributes"] is None:
                email = identity["name_id_format"] == "email"
                identity["attributes"] = {"email": [identity["name_id"]]} if email else {}
            self.next_shape = {k: shape[k] for k in ("mode", "evil_name_id", "audience", "recipient",
                                                      "in_response_to") if k in shape}

    def take_shape(self):
        """The shape for the response being built now (the identity plus this one-shot part); resets the next."""
        with self.lock:
            shape = {"mode": DEFAULT_MODE, "evil_name_id": DEFAULT_EVIL_NAME_ID, **copy.deepcopy(self.identity),
                     **self.next_shape}
            self.next_shape = {}
        return shape

    def sp(self, entity_id):
        with self.lock:
            sp = self.sps.get(entity_id)
        if sp is None:
            raise RequestError(f"unknown SP {entity_id!r}: POST its metadata to /sp first")
        return sp

    # --- SSO ------------------------------------------------------------------------------------------------------

    def answer_authn_request(self, saml_request):
        """Parses an HTTP-Redirect AuthnRequest with pysaml2; returns (acs_url, response XML)."""
        try:
            request = self.server.parse_authn_request(saml_request, BINDING_HTTP_REDIRECT)
        except Exception as e:
            raise RequestError(f"cannot parse the AuthnRequest: {type(e).__name__}: {e}") from e
        message = request.message
        if message.issuer is None or not message.issuer.text:
            raise RequestError("the AuthnRequest has no Issuer")
        sp_entity_id = message.issuer.text.strip()
        sp = self.sp(sp_entity_id)
        acs_url = message.assertion_consumer_service_url or sp["acs_urls"][0]
        if acs_url not in sp["acs_urls"]:
            raise RequestError(f"AssertionConsumerServiceURL {acs_url!r} is not registered for {sp_entity_id!r}")
        return acs_url, self.build_response(sp_entity_id, sp, acs_url, message.id)

    def answer_unsolicited(self, sp_entity_id):
        sp = self.sp(sp_entity_id)
        acs_url = sp["acs_urls"][0]
        return acs_url, self.build_response(sp_entity_id, sp, acs_url, None)

    # --- building responses ---------------------------------------------------------------------------------------

    def build_response(self, sp_entity_id, sp, acs_url, in_response_to):
        """The Response XML (a string) for the SP, shaped by the current /next."""
        shape = self.take_shape()
        mode = shape["mode"]
        if "in_response_to" in shape:
            in_response_to = shape["in_response_to"]
        recipient = shape.get("recipient", acs_url)
        name_id, evil_name_id = shape["name_id"], shape["evil_name_id"]

        # 1. pysaml2 builds the unsigned Response and Assertion (Issuer, Subject with bearer SubjectConfirmation,
        #    Conditions with AudienceRestriction, AuthnStatement); the AttributeStatement is ours, see below.
        response_xml = self.server.create_authn_response(
            identity={}, in_response_to=in_response_to, destination=recipient, sp_entity_id=sp_entity_id,
            name_id=saml.NameID(format=NAME_ID_FORMATS[shape["name_id_format"]], text=name_id),
            authn={"class_ref": PASSWORD_PROTECTED_TRANSPORT}, sign_response=False, sign_assertion=False,
            encrypt_assertion=False,
        )
        response = parse_xml(str(response_xml))
        assertion = attacks.first(response, "saml:Assertion")
        self.set_attributes(assertion, shape["attributes"])

        # 2. Edits before signing.
        if "audience" in shape or mode == "wrong-audience":
            audience = "https://other.example/sp" if mode == "wrong-audience" else shape["audience"]
            attacks.first(assertion, "saml:Conditions/saml:AudienceRestriction/saml:Audience").text = audience
        if mode == "expired":
            now = now_utc()
            conditions = attacks.first(assertion, "saml:Conditions")
            conditions.set("NotBefore", saml_time(now - datetime.timedelta(minutes=20)))
            conditions.set("NotOnOrAfter", saml_time(now - datetime.timedelta(minutes=10)))
            attacks.first(assertion, "saml:Subject/saml:SubjectConfirmation/saml:SubjectConfirmationData").set(
                "NotOnOrAfter", saml_time(now - datetime.timedelta(minutes=10)))
        if mode == "comment-injection":
            name = attacks.first(assertion, "saml:Subject/saml:NameID")
            comment = etree.Comment("")
            comment.tail = ".evil.example"
            name.append(comment)
        if mode == "wrong-issuer":
            attacks.first(assertion, "saml:Issuer").text = "https://other-idp.example/metadata"
        if mode == "status-failure":
            response.remove(assertion)
            status = attacks.first(response, "samlp:Status")
            status.clear()
            top = etree.SubElement(status, f"{{{SAMLP}}}StatusCode",
                                   Value="urn:oasis:names:tc:SAML:2.0:status:Responder")
            etree.SubElement(top, f"{{{SAMLP}}}StatusCode", Value="urn:oasis:names:tc:SAML:2.0:status:AuthnFailed")
            etree.SubElement(status, f"{{{SAMLP}}}StatusMessage").text = "The user could not be authenticated"
        if mode == "unsigned-assertion-in-signed-envelope":
            attacks.set_name_id(assertion, name_id, evil_name_id)
            return self.sign_envelope_elsewhere(response)

        # 3. Signing (and encrypting), by xmlsec1 through pysaml2: the assertion first, then the Response.
        sign_assertion, sign_response = SIGNING.get(mode, (True, False))
        algorithms = (SIG_RSA_SHA1, DIGEST_SHA1) if mode == "sha1" else (SIG_RSA_SHA256, DIGEST_SHA256)
        xml = to_string(response)
        if sign_assertion:
            xml = self.sign(xml, ASSERTION_NODE, "saml:Assertion", *algorithms)
        if mode == "encrypted-assertion":
            xml = self.encrypt_assertion(xml, sp)
        if sign_response:
            xml = self.sign(xml, RESPONSE_NODE, None, *algorithms)

        # 4. Edits after signing (no re-signing).
        edit = {**attacks.XSW, "tampered-assertion": attacks.tamper, "duplicate-id": attacks.duplicate_id}.get(mode)
        if edit is not None:
            response = parse_xml(xml)
            edit(response, name_id, evil_name_id)
            xml = to_string(response)
        if mode == "doctype":
            if xml.startswith("<?xml"):
                xml = xml[xml.index("?>") + 2:].lstrip()
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                "<!DOCTYPE samlp:Response [\n"
                '  <!ENTITY lol "lol">\n'
                '  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n'
                '  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">\n'
                '  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">\n'
                '  <!ENTITY xxe SYSTEM "file:///etc/hostname">\n'
                "]>\n" + xml
            )
        return xml

    @staticmethod
    def set_attributes(assertion, attributes):
        """Replaces pysaml2's AttributeStatement (which maps names through its attribute maps) by one whose Attribute
        Names are exactly the /next keys (NameFormat basic, xs:string values). No attributes, no statement."""
        for statement in assertion.findall("saml:AttributeStatement", NS):
            assertion.remove(statement)
        if not attributes:
            return
        xsi = "http://www.w3.org/2001/XMLSchema-instance"
        statement = etree.SubElement(assertion, f"{{{SAML}}}AttributeStatement", nsmap={"xs": XS, "xsi": xsi})
        for name, values in attributes.items():
            attribute = etree.SubElement(statement, f"{{{SAML}}}Attribute", Name=name, NameFormat=ATTRNAME_FORMAT_BASIC)
            for value in values:
                element = etree.SubElement(attribute, f"{{{SAML}}}AttributeValue", {f"{{{xsi}}}type": "xs:string"})
                element.text = str(value)

    def sign(self, xml, node_name, child_path, sign_alg, digest_alg):
        """Signs the Response (child_path None) or its child at child_path: puts pysaml2's signature template (an
        enveloped signature, exclusive c14n, the certificate in KeyInfo) right after the element's Issuer, then
        has xmlsec1 fill it in."""
        root = parse_xml(xml)
        element = root if child_path is None else attacks.first(root, child_path)
        template = pre_signature_part(element.get("ID"), self.cert_base64, digest_alg=digest_alg, sign_alg=sign_alg)
        attacks.first(element, "saml:Issuer").addnext(parse_xml(str(template)))
        return self.server.sec.sign_statement(to_string(root), node_name, node_id=element.get("ID"))

    def encrypt_assertion(self, xml, sp):
        """Wraps the (signed) assertion in saml:EncryptedAssertion and has xmlsec1 encrypt it in place with a fresh
        AES-256 key (aes256-cbc), itself encrypted with RSA-OAEP (rsa-oaep-mgf1p) to the SP's certificate."""
        if sp["encryption_cert_file"] is None:
            raise RequestError("the SP's metadata has no encryption certificate")
        root = parse_xml(xml)
        assertion = attacks.first(root, "saml:Assertion")
        wrapper = etree.Element(f"{{{SAML}}}EncryptedAssertion")
        root.replace(assertion, wrapper)
        wrapper.append(assertion)
        template = pre_encryption_part(msg_enc=AES256_CBC, key_enc=RSA_OAEP_MGF1P)
        return self.server.sec.crypto.encrypt_assertion(
            to_string(root), sp["encryption_cert_file"], str(template), key_type="aes-256", node_xpath=ASSERT_XPATH)

    def sign_envelope_elsewhere(self, response):
        """Gives the Response a valid IdP signature that covers only a ds:Object inside the Signature (an enveloping
        signature, Reference URI #_envelope_object), not the Response or its assertion. pysaml2's signing always
        references the element it signs, so this one calls xmlsec1 directly."""
        object_id = "_envelope_object"
        signature = parse_xml(
            f'<ds:Signature xmlns:ds="{DS}"><ds:SignedInfo>'
            f'<ds:CanonicalizationMethod Algorithm="{EXC_C14N}"/><ds:SignatureMethod Algorithm="{SIG_RSA_SHA256}"/>'
            f'<ds:Reference URI="#{object_id}"><ds:Transforms><ds:Transform Algorithm="{EXC_C14N}"/>'
            f'</ds:Transforms><ds:DigestMethod Algorithm="{DIGEST_SHA256}"/><ds:DigestValue/></ds:Reference>'
            f"</ds:SignedInfo><ds:SignatureValue/><ds:KeyInfo><ds:X509Data><ds:X509Certificate>{self.cert_base64}"
            f'</ds:X509Certificate></ds:X509Data></ds:KeyInfo><ds:Object Id="{object_id}">Signed by the test IdP'
            "</ds:Object></ds:Signature>")
        attacks.first(response, "saml:Issuer").addnext(signature)
        with tempfile.NamedTemporaryFile("w", suffix=".xml", dir=self.folder, delete=False) as f:
            f.write(to_string(response))
        try:
            result = subprocess.run(
                [XMLSEC1, "--sign", "--privkey-pem", self.key_file, "--id-attr:Id", f"{DS}:Object", f.name],
                capture_output=True, text=True, check=True)
        finally:
            os.unlink(f.name)
        return result.stdout



def make_handler(idp):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002 - keep stderr quiet unless something fails
            pass

        def send(self, status, body=b"", content_type="text/plain; charset=utf-8"):
            if isinstance(body, str):
                body = body.encode()
            self.send_response(status)
            if body:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def body(self):
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self):  # noqa: N802
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            try:
                if url.path == "/metadata":
                    self.send(200, idp.metadata_xml, "application/samlmetadata+xml")
                elif url.path == "/certificate":
                    self.send(200, idp.cert_pem, "application/x-pem-file")
                elif url.path == "/sso/redirect":
                    if "SAMLRequest" not in query:
                        raise RequestError("SAMLRequest is missing")
                    self.post_back(*idp.answer_authn_request(query["SAMLRequest"]), query.get("RelayState"))
                elif url.path == "/sso/initiate":
                    if "sp" not in query:
                        raise RequestError("sp (the SP's entity id) is missing")
                    self.post_back(*idp.answer_unsolicited(query["sp"]), query.get("RelayState"))
                else:
                    self.send(404, "not found")
            except RequestError as e:
                self.send(400, str(e))

        def do_POST(self):  # noqa: N802
            try:
                if self.path == "/sp":
                    idp.register_sp(self.body())
                    self.send(204)
                elif self.path == "/next":
                    try:
                        shape = json.loads(self.body())
                    except ValueError as e:
                        raise RequestError(f"the body is not JSON: {e}") from e
                    idp.set_next(shape)
                    self.send(204)
                else:
                    self.send(404, "not found")
            except RequestError as e:
                self.send(400, str(e))

        def post_back(self, acs_url, response_xml, relay_state):
            """The HTTP-POST binding: the response for the browser to post to the ACS, or as JSON for a test."""
            saml_response = base64.b64encode(response_xml.encode()).decode()
            if "application/json" in self.headers.get("Accept", ""):
                payload = {"acs_url": acs_url, "SAMLResponse": saml_response, "RelayState": relay_state}
                self.send(200, json.dumps(payload), "application/json")
                return
            relay = "" if relay_state is None else (
                f'<input type="hidden" name="RelayState" value="{html.escape(relay_state)}">')
            page = (
                "<!DOCTYPE html>\n<html><head><title>Test IdP</title></head><body>\n"
                f'<form method="post" action="{html.escape(acs_url)}">\n'
                f'<input type="hidden" name="SAMLResponse" value="{saml_response}">\n{relay}\n'
                '<noscript><button type="submit">Continue</button></noscript>\n</form>\n'
                "<script>document.forms[0].submit();</script>\n</body></html>\n"
            )
            self.send(200, page, "text/html; charset=utf-8")

    return Handler


def exit_when_stdin_closes(folder):
    sys.stdin.read()
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)


def main():
    folder = tempfile.mkdtemp(prefix="saml-idp-")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), None)
    httpd.daemon_threads = True
    idp = IdP(httpd.server_address[1], folder)
    httpd.RequestHandlerClass = make_handler(idp)
    threading.Thread(target=exit_when_stdin_closes, args=(folder,), daemon=True).start()
    print(f"READY {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
