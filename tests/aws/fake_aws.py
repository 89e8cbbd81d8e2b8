#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fake of the AWS endpoints accelfit reads prices from (Python 3 stdlib only).

One HTTPS port answers, told apart by the request as AWS's endpoints would be:
  POST  X-Amz-Target: AWSPriceListService.GetProducts   Pricing, JSON 1.1: the price
        documents of tests/fixtures/aws/price-document.json's shape, each a JSON string
        in PriceList, paged by NextToken (--pricing-page-size per page)
  POST  Action=DescribeSpotPriceHistory (form)          EC2 Query API, XML, newest first,
        paged by nextToken (--spot-page-size per page)
  POST  Action=AssumeRoleWithWebIdentity (form)         STS, unsigned, XML credentials
  GET   /v1/credentials                                 EKS Pod Identity agent, JSON,
        Authorization: the configured token
Every Pricing and EC2 request must carry a valid SigV4 signature, checked as AWS checks
it (verify_sigv4 below, from the published algorithm): the credential scope names a key
this fake issued or was given, the service and region of the endpoint, and today's date;
X-Amz-Date is within 15 minutes; the canonical request (method, URI-encoded path, sorted
URI-encoded query, the SignedHeaders lowercased with values trimmed, the SHA-256 of the
payload) hashed into the string to sign, signed with the HMAC chain kDate, kRegion,
kService, kSigning, gives the Signature; the session token, when the key has one, is sent
in X-Amz-Security-Token and signed. Refusals have AWS's error shapes: JSON __type/message
for Pricing, <Response><Errors><Error> for EC2, <ErrorResponse><Error> for STS.

A plain-HTTP control channel on 127.0.0.1 takes POST /<command> with a JSON body:
  credentials {akid, secret, token?, expires_in?}   accept this key (static keys)
  web_token {token, role_arn?}     the web identity token STS accepts (and the role)
  pod_token {token}                the Authorization the Pod Identity endpoint accepts
  duration {seconds}               lifetime of the credentials STS and Pod Identity issue
  on_demand {region, prices: {type: usd}}          replaces a region's on-demand prices
  reservations {region, items: [{id, type, zone, block?, end_in?, state?, count?}],
               denied?}         replaces a region's capacity reservations (`end_in`: seconds
                                   from now of endDate; none: unlimited); denied: the
                                   caller may not DescribeCapacityReservations (403)
  spot {region, items: [{zone, type, price, ago}]} replaces a region's spot history
                                   (`ago`: seconds before now of the item's timestamp)
  page_size {pricing?, ec2?}
  fault {kind, service?, count?, status?, code?, message?}   the next `count` requests to
        `service` (pricing, ec2, sts, pod; default any) fail: kind throttle (the service's
        throttling error), malformed (200 with a broken body), hang (no answer until
        `release`), error (status, code, message as given), raw (answers status, default
        200, with body `head` + `item` * `repeat` + `tail` of content_type, after `delay`
        seconds: hostile answers)
  release                          ends every hang
  expire_credentials               every issued temporary key has expired
  requests                         [{service, akid, token, ok, error, ...}] so far
  clear                            forgets requests and faults
On start it prints "READY <https port> <admin port>" and exits when stdin closes.
"""
import argparse
import copy
import datetime
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, quote, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import fake_server  # noqa: E402
FIXTURES = os.path.join(HERE, "..", "fixtures", "aws")

PRICING_FILTERS = {"regionCode", "tenancy", "operatingSystem", "preInstalledSw",
                   "capacitystatus", "marketoption", "productFamily", "instanceType"}
REQUIRED_FILTERS = {"tenancy": "Shared", "operatingSystem": "Linux", "preInstalledSw": "NA",
                    "capacitystatus": "Used", "productFamily": "Compute Instance"}


def iso(t, millis=False):
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + (".000Z" if millis else "Z")


class AwsError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.keys = {}          # akid -> {secret, token, expires}
        self.web_token = None
        self.role_arn = None
        self.pod_token = None
        self.duration = 3600
        self.issued = 0
        self.on_demand = {
            "eu-west-1": {"g5.xlarge": "1.1230000000", "g5.12xlarge": "6.3440000000",
                          "p4d.24xlarge": "35.3900000000", "inf2.xlarge": "0.8484000000",
                          "m5.large": "0.1070000000"},
            "us-east-1": {"g5.xlarge": "1.0060000000", "p4d.24xlarge": "32.7726000000",
                          "m5.large": "0.0960000000"},
        }
        self.spot = {
            "eu-west-1": [
                {"zone": "eu-west-1a", "type": "g5.xlarge", "price": "0.4321", "ago": 60},
                {"zone": "eu-west-1a", "type": "g5.xlarge", "price": "0.5000", "ago": 3600},
                {"zone": "eu-west-1b", "type": "g5.xlarge", "price": "0.4410", "ago": 120},
                {"zone": "eu-west-1a", "type": "m5.large", "price": "0.0380", "ago": 30},
                {"zone": "eu-west-1b", "type": "p4d.24xlarge", "price": "12.1000", "ago": 90},
            ],
        }
        self.reservations = {}          # region -> [{id, type, zone, block, end_in, state}]
        self.resv_denied = False
        self.page_size = {"pricing": 2, "ec2": 2}
        self.faults = []
        self.requests = []
        self.release = threading.Event()
        with open(os.path.join(FIXTURES, "price-document.json")) as f:
            self.template = json.load(f)

    def issue(self, kind):
        with self.lock:
            self.issued += 1
            n = self.issued
            akid = "ASIAFAKE%012d" % n
            self.keys[akid] = {"secret": "secret/%d+%s" % (n, uuid.uuid4().hex),
                               "token": "token-%s-%d-%s" % (kind, n, uuid.uuid4().hex),
                               "expires": time.time() + self.duration}
            return akid, self.keys[akid]

    def take_fault(self, service):
        with self.lock:
            for f in self.faults:
                if f.get("count", 1) > 0 and f.get("service", service) == service:
                    f["count"] = f.get("count", 1) - 1
                    return dict(f)
        return None

    def log(self, **kw):
        with self.lock:
            self.requests.append(kw)


STATE = None


def price_document(region, itype, usd):
    doc = copy.deepcopy(STATE.template)
    sku = hashlib.sha1(("%s/%s" % (region, itype)).encode()).hexdigest()[:16].upper()
    attrs = doc["product"]["attributes"]
    attrs["instanceType"] = itype
    attrs["regionCode"] = region
    attrs["usagetype"] = "BoxUsage:" + itype
    doc["product"]["sku"] = sku
    (old_term,) = doc["terms"]["OnDemand"].values()
    term = copy.deepcopy(old_term)
    (dim,) = term["priceDimensions"].values()
    dim["rateCode"] = sku + ".JRTCKXETXF.6YS6EN2CT7"
    dim["description"] = "$%s per On Demand Linux %s Instance Hour" % (usd.rstrip("0"), itype)
    dim["pricePerUnit"] = {"USD": usd}
    term["priceDimensions"] = {dim["rateCode"]: dim}
    term["sku"] = sku
    doc["terms"]["OnDemand"] = {sku + ".JRTCKXETXF": term}
    return json.dumps(doc, separators=(",", ":"))


# ---- SigV4, as AWS documents it ---------------------------------------------------------

def uri_encode(s, slash=True):
    return quote(s, safe="-_.~" + ("" if slash else "/"))


def canonical_query(query):
    pairs = parse_qsl(query, keep_blank_values=True)
    enc = sorted((uri_encode(k), uri_encode(v)) for k, v in pairs)
    return "&".join("%s=%s" % kv for kv in enc)


def hmac256(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signing_key(secret, date, region, service):
    k = hmac256(("AWS4" + secret).encode(), date)
    k = hmac256(k, region)
    k = hmac256(k, service)
    return hmac256(k, "aws4_request")


SIG_MISMATCH = ("The request signature we calculated does not match the signature you "
                "provided. Check your AWS Secret Access Key and signing method. Consult the "
                "service documentation for details.")


def verify_sigv4(h, body, service, region, errors):
    """Raises AwsError unless the request is signed for `service` in `region` (None: any).
    `errors` maps the failures to the service's codes. Returns (akid, region)."""
    auth = h.headers.get("Authorization", "")
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^,]+), ?SignedHeaders=([^,]+), ?"
                     r"Signature=([0-9a-f]{64})", auth.strip())
    if not m:
        raise AwsError(400 if service == "pricing" else 401, errors["missing"],
                       "Missing Authentication Token" if auth == "" else
                       "Authorization header requires 'Credential', 'SignedHeaders' and "
                       "'Signature' parameters.")
    cred, signed, signature = m.groups()
    parts = cred.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise AwsError(403, errors["signature"], "Credential should be scoped correctly.")
    akid, date, sregion, sservice, _ = parts
    with STATE.lock:
        key = STATE.keys.get(akid)
    if key is None:
        raise AwsError(403 if service == "pricing" else 401, errors["unknown"],
                       "The security token included in the request is invalid." if
                       service == "pricing" else
                       "AWS was not able to validate the provided access credentials")
    if sservice != service or (region and sregion != region):
        raise AwsError(403, errors["signature"],
                       "Credential should be scoped to a valid region and service "
                       "('%s', '%s'), not ('%s', '%s')." % (region, service, sregion, sservice))
    amz_date = h.headers.get("X-Amz-Date", "")
    try:
        t = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        raise AwsError(403, errors["signature"], "Missing or invalid X-Amz-Date")
    if abs(time.time() - t) > 15 * 60:
        raise AwsError(403, errors["signature"], "Signature expired: %s is now earlier than "
                       "%s" % (amz_date, iso(time.time() - 900)))
    if not amz_date.startswith(date):
        raise AwsError(403, errors["signature"], "Date in Credential scope does not match "
                       "YYYYMMDD from ISO-8601 version of date from HTTP")
    names = signed.split(";")
    if names != sorted(names) or "host" not in names or "x-amz-date" not in names:
        raise AwsError(403, errors["signature"], "SignedHeaders must be sorted and include "
                       "host and x-amz-date: " + signed)
    token = h.headers.get("X-Amz-Security-Token")
    if token is not None and "x-amz-security-token" not in names:
        raise AwsError(403, errors["signature"], "X-Amz-Security-Token is not signed")
    lines = []
    for n in names:
        values = h.headers.get_all(n)
        if not values:
            raise AwsError(403, errors["signature"], "signed header %s is missing" % n)
        lines.append("%s:%s\n" % (n, ",".join(re.sub(r"\s+", " ", v.strip()) for v in values)))
    url = urlsplit(h.path)
    creq = "\n".join([h.command, uri_encode(url.path or "/", slash=False),
                      canonical_query(url.query), "".join(lines), signed,
                      hashlib.sha256(body).hexdigest()])
    scope = "/".join([date, sregion, sservice, "aws4_request"])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    want = hmac.new(signing_key(key["secret"], date, sregion, sservice), sts.encode(),
                    hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, signature):
        if ARGS.verbose:
            sys.stderr.write("canonical request:\n%s\nstring to sign:\n%s\n" % (creq, sts))
        raise AwsError(403, errors["signature"], SIG_MISMATCH)
    if key["token"] is not None and token != key["token"]:
        raise AwsError(403, errors["unknown"],
                       "The security token included in the request is invalid.")
    if key["expires"] is not None and time.time() >= key["expires"]:
        raise AwsError(400 if service == "pricing" else 400, errors["expired"],
                       "The security token included in the request is expired")
    return akid, sregion


PRICING_ERRORS = {"missing": "MissingAuthenticationTokenException",
                  "signature": "InvalidSignatureException",
                  "unknown": "UnrecognizedClientException",
                  "expired": "ExpiredTokenException", "throttle": "ThrottlingException"}
EC2_ERRORS = {"missing": "AuthFailure", "signature": "SignatureDoesNotMatch",
              "unknown": "AuthFailure", "expired": "ExpiredToken",
              "throttle": "RequestLimitExceeded"}


# ---- the endpoints ------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if ARGS.verbose:
            sys.stderr.write("fake_aws: " + fmt % args + "\n")

    def send(self, status, ctype, body, headers=()):
        if getattr(self, "deferred", None) is not None:
            # dispatch logs the request first: a client that has its answer finds it logged
            self.deferred.append((status, ctype, body, headers))
            return
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_error_doc(self, service, e):
        if service == "pricing":
            self.send(e.status, "application/x-amz-json-1.1",
                      json.dumps({"__type": e.code, "message": e.message}),
                      [("x-amzn-ErrorType", e.code)])
        elif service == "ec2":
            self.send(e.status, "text/xml;charset=UTF-8",
                      '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>'
                      '%s</Code><Message>%s</Message></Error></Errors><RequestID>%s'
                      '</RequestID></Response>' % (xml_escape(e.code), xml_escape(e.message),
                                                   uuid.uuid4()))
        elif service == "sts":
            self.send(e.status, "text/xml",
                      '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">\n'
                      '  <Error>\n    <Type>Sender</Type>\n    <Code>%s</Code>\n'
                      '    <Message>%s</Message>\n  </Error>\n  <RequestId>%s</RequestId>\n'
                      '</ErrorResponse>\n' % (xml_escape(e.code), xml_escape(e.message),
                                              uuid.uuid4()))
        else:
            self.send(e.status, "application/json",
                      json.dumps({"code": e.code, "message": e.message}))

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.dispatch(b"")

    def do_POST(self):
        self.dispatch(self.read_body())

    def classify(self, body):
        if self.command == "GET" and urlsplit(self.path).path == "/v1/credentials":
            return "pod", {}
        if self.command != "POST":
            return None, {}
        if self.headers.get("X-Amz-Target"):
            return "pricing", {}
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        action = form.get("Action")
        if action == "AssumeRoleWithWebIdentity":
            return "sts", form
        if action in ("DescribeSpotPriceHistory", "DescribeCapacityReservations"):
            return "ec2", form
        return None, form

    def dispatch(self, body):
        service, form = self.classify(body)
        entry = {"service": service, "method": self.command, "path": self.path,
                 "akid": None, "token": self.headers.get("X-Amz-Security-Token"),
                 "authorization": self.headers.get("Authorization"),
                 "ok": False, "error": None}
        if service is None:
            entry["error"] = "unknown request"
            STATE.log(**entry)
            self.send(400, "text/plain", "unknown request")
            return
        self.deferred = []
        try:
            fault = STATE.take_fault(service)
            if fault and fault["kind"] == "hang":
                entry["error"] = "hang"
                STATE.log(**entry)
                STATE.release.wait(3600)
                self.close_connection = True
                return
            if service == "pricing":
                entry["akid"], _ = verify_sigv4(self, body, "pricing", "us-east-1",
                                                PRICING_ERRORS)
                self.apply_fault(fault, service)
                entry.update(self.get_products(body))
            elif service == "ec2":
                entry["akid"], region = verify_sigv4(self, body, "ec2", None, EC2_ERRORS)
                self.apply_fault(fault, service)
                if form.get("Action") == "DescribeCapacityReservations":
                    entry.update(self.capacity_reservations(form, region))
                else:
                    entry.update(self.spot_history(form, region))
            elif service == "sts":
                self.apply_fault(fault, service)
                entry.update(self.assume_role(form))
            else:
                self.apply_fault(fault, service)
                entry.update(self.pod_identity())
            entry["ok"] = True
        except Malformed as m:
            entry["error"] = "malformed"
            self.send(m.status, m.ctype, m.body)
        except AwsError as e:
            entry["error"] = "%s: %s" % (e.code, e.message)
            self.send_error_doc(service, e)
        STATE.log(**entry)
        answers, self.deferred = self.deferred, None
        for a in answers:
            self.send(*a)

    def apply_fault(self, fault, service):
        if not fault:
            return
        kind = fault["kind"]
        if kind == "throttle":
            if service == "pricing":
                raise AwsError(400, "ThrottlingException", "Rate exceeded")
            if service == "ec2":
                raise AwsError(503, "RequestLimitExceeded", "Request limit exceeded.")
            raise AwsError(400, "Throttling", "Rate exceeded")
        if kind == "error":
            raise AwsError(fault.get("status", 400), fault.get("code", "InternalFailure"),
                           fault.get("message", "injected"))
        if kind == "raw":
            time.sleep(fault.get("delay", 0))
            body = (fault.get("head", "") + fault.get("item", "") * fault.get("repeat", 0) +
                    fault.get("tail", ""))
            raise Malformed(fault.get("content_type", "text/xml;charset=UTF-8"), body,
                            fault.get("status", 200))
        if kind == "malformed":
            if service == "pricing":
                raise Malformed("application/x-amz-json-1.1",
                                '{"FormatVersion":"aws_v1","PriceList":["{\\"product\\":"]}')
            if service == "ec2":
                raise Malformed("text/xml;charset=UTF-8",
                                '<?xml version="1.0" encoding="UTF-8"?>\n'
                                '<DescribeSpotPriceHistoryResponse><spotPriceHistorySet><item>')
            raise Malformed("text/plain", "<html>gateway error</html>")

    def get_products(self, body):
        try:
            req = json.loads(body)
        except ValueError:
            raise AwsError(400, "SerializationException", "Start of structure or map found "
                           "where not expected.")
        if self.headers.get("X-Amz-Target") != "AWSPriceListService.GetProducts":
            raise AwsError(400, "UnknownOperationException", "")
        if self.headers.get("Content-Type") != "application/x-amz-json-1.1":
            raise AwsError(400, "SerializationException", "bad Content-Type")
        if req.get("ServiceCode") != "AmazonEC2" or req.get("FormatVersion") != "aws_v1":
            raise AwsError(400, "InvalidParameterException", "ServiceCode AmazonEC2 and "
                           "FormatVersion aws_v1 expected")
        size = req.get("MaxResults", 100)
        if not isinstance(size, int) or not 1 <= size <= 100:
            raise AwsError(400, "ValidationException", "1 validation error detected: Value "
                           "'%s' at 'maxResults' failed to satisfy constraint: Member must "
                           "have value less than or equal to 100" % size)
        filters = {}
        for f in req.get("Filters", []):
            if f.get("Type") != "TERM_MATCH" or f.get("Field") not in PRICING_FILTERS:
                raise AwsError(400, "InvalidParameterException", "Input contains invalid "
                               "filter: %s" % json.dumps(f))
            filters[f["Field"]] = f.get("Value")
        for k, v in REQUIRED_FILTERS.items():
            if filters.get(k) != v:
                raise AwsError(400, "InvalidParameterException", "expected filter %s=%s" % (k, v))
        region = filters.get("regionCode")
        with STATE.lock:
            prices = sorted(STATE.on_demand.get(region, {}).items())
            per_page = min(size, STATE.page_size["pricing"])
        if "instanceType" in filters:
            prices = [p for p in prices if p[0] == filters["instanceType"]]
        start = 0
        if req.get("NextToken") is not None:
            m = re.fullmatch(r"page-(\d+)-(.*)", req["NextToken"])
            if not m or m.group(2) != region:
                raise AwsError(400, "InvalidNextTokenException", "The pagination token is "
                               "invalid. Try again without a pagination token.")
            start = int(m.group(1))
        page = prices[start:start + per_page]
        ans = {"FormatVersion": "aws_v1",
               "PriceList": [price_document(region, t, usd) for t, usd in page]}
        if start + per_page < len(prices):
            ans["NextToken"] = "page-%d-%s" % (start + per_page, region)
        self.send(200, "application/x-amz-json-1.1", json.dumps(ans))
        return {"region": region, "filters": filters, "items": len(page)}

    def spot_history(self, form, region):
        if form.get("Version") != "2016-11-15":
            raise AwsError(400, "InvalidParameterValue", "Version 2016-11-15 expected")
        if form.get("ProductDescription.1") != "Linux/UNIX":
            raise AwsError(400, "InvalidParameterValue", "Value (%s) for parameter "
                           "ProductDescription is invalid." % form.get("ProductDescription.1"))
        try:
            datetime.datetime.strptime(form.get("StartTime", ""), "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            raise AwsError(400, "InvalidParameterValue", "Value (%s) for parameter startTime "
                           "is invalid." % form.get("StartTime"))
        types = [v for k, v in form.items() if re.fullmatch(r"InstanceType\.\d+", k)]
        try:
            size = int(form.get("MaxResults", "1000"))
        except ValueError:
            size = -1
        if not 5 <= size <= 1000:
            raise AwsError(400, "InvalidParameterValue", "Value ( %s ) for parameter "
                           "maxResults is invalid. Parameter must be between 5 and 1000."
                           % form.get("MaxResults"))
        with STATE.lock:
            items = [i for i in STATE.spot.get(region, []) if not types or i["type"] in types]
            per_page = min(size, STATE.page_size["ec2"])
        now = time.time()
        items = sorted(items, key=lambda i: i["ago"])
        start = 0
        if form.get("NextToken"):
            m = re.fullmatch(r"spot-(\d+)", form["NextToken"])
            if not m:
                raise AwsError(400, "InvalidParameterValue", "Invalid NextToken")
            start = int(m.group(1))
        page = items[start:start + per_page]
        nxt = "spot-%d" % (start + per_page) if start + per_page < len(items) else ""
        xml = ['<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse '
               'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">\n    <requestId>%s'
               '</requestId>\n    <spotPriceHistorySet>' % uuid.uuid4()]
        for i in page:
            xml.append("\n        <item>\n            <instanceType>%s</instanceType>\n"
                       "            <productDescription>Linux/UNIX</productDescription>\n"
                       "            <spotPrice>%s</spotPrice>\n            <timestamp>%s"
                       "</timestamp>\n            <availabilityZone>%s</availabilityZone>\n"
                       "        </item>" % (i["type"], i["price"], iso(now - i["ago"], True),
                                            i["zone"]))
        xml.append("\n    </spotPriceHistorySet>\n    %s\n</DescribeSpotPriceHistoryResponse>\n"
                   % ("<nextToken>%s</nextToken>" % nxt if nxt else "<nextToken/>"))
        self.send(200, "text/xml;charset=UTF-8", "".join(xml))
        return {"region": region, "types": types, "items": len(page)}

    def capacity_reservations(self, form, region):
        """DescribeCapacityReservations: the EC2 API reference's answer shape, paged."""
        if form.get("Version") != "2016-11-15":
            raise AwsError(400, "InvalidParameterValue", "Version 2016-11-15 expected")
        with STATE.lock:
            if STATE.resv_denied:
                raise AwsError(403, "UnauthorizedOperation", "You are not authorized to perform "
                               "this operation. User: arn:aws:sts::123456789012:assumed-role/"
                               "accelfit is not authorized to perform: "
                               "ec2:DescribeCapacityReservations")
            items = list(STATE.reservations.get(region, []))
            per_page = STATE.page_size["ec2"]
        states = [v for k, v in form.items() if re.fullmatch(r"Filter\.1\.Value\.\d+", k)]
        if form.get("Filter.1.Name") == "state":
            items = [i for i in items if i.get("state", "active") in states]
        start = 0
        if form.get("NextToken"):
            m = re.fullmatch(r"cr-page-(\d+)", form["NextToken"])
            if not m:
                raise AwsError(400, "InvalidParameterValue", "Invalid NextToken")
            start = int(m.group(1))
        page = items[start:start + per_page]
        nxt = "cr-page-%d" % (start + per_page) if start + per_page < len(items) else ""
        now = time.time()
        xml = ['<?xml version="1.0" encoding="UTF-8"?>\n<DescribeCapacityReservationsResponse '
               'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">\n    <requestId>%s</requestId>\n'
               '    <capacityReservationSet>' % uuid.uuid4()]
        for i in page:
            end = ("\n            <endDate>%s</endDate>\n            <endDateType>limited"
                   "</endDateType>" % iso(now + i["end_in"], True)
                   if i.get("end_in") is not None else
                   "\n            <endDateType>unlimited</endDateType>")
            xml.append("\n        <item>\n            <capacityReservationId>%s"
                       "</capacityReservationId>\n            <ownerId>123456789012</ownerId>\n"
                       "            <instanceType>%s</instanceType>\n"
                       "            <instancePlatform>Linux/UNIX</instancePlatform>\n"
                       "            <availabilityZone>%s</availabilityZone>\n"
                       "            <tenancy>default</tenancy>\n"
                       "            <totalInstanceCount>%d</totalInstanceCount>\n"
                       "            <availableInstanceCount>0</availableInstanceCount>\n"
                       "            <state>%s</state>%s\n"
                       "            <instanceMatchCriteria>targeted</instanceMatchCriteria>\n"
                       "            <reservationType>%s</reservationType>\n"
                       "            <tagSet><item><key>team</key><value>ml</value></item></tagSet>\n"
                       "        </item>"
                       % (i["id"], i["type"], i["zone"], i.get("count", 1),
                          i.get("state", "active"), end,
                          "capacity-block" if i.get("block") else "default"))
        xml.append("\n    </capacityReservationSet>\n    %s\n</DescribeCapacityReservationsResponse>\n"
                   % ("<nextToken>%s</nextToken>" % nxt if nxt else ""))
        self.send(200, "text/xml;charset=UTF-8", "".join(xml))
        return {"region": region, "action": "DescribeCapacityReservations", "items": len(page)}

    def assume_role(self, form):
        if self.headers.get("Authorization"):
            raise AwsError(400, "InvalidParameterValue", "the fake takes unsigned "
                           "AssumeRoleWithWebIdentity, as the SDKs send it")
        for p in ("Version", "RoleArn", "RoleSessionName", "WebIdentityToken"):
            if not form.get(p):
                raise AwsError(400, "MissingParameter", "The request must contain the "
                               "parameter %s" % p)
        if not re.fullmatch(r"[\w+=,.@-]{2,64}", form["RoleSessionName"]):
            raise AwsError(400, "ValidationError", "1 validation error detected: Value at "
                           "'roleSessionName' failed to satisfy constraint")
        with STATE.lock:
            want_token, want_role = STATE.web_token, STATE.role_arn
        if want_role and form["RoleArn"] != want_role:
            raise AwsError(403, "AccessDenied", "Not authorized to perform "
                           "sts:AssumeRoleWithWebIdentity")
        if form["WebIdentityToken"] != want_token:
            raise AwsError(400, "InvalidIdentityToken", "The web identity token that was "
                           "passed could not be validated by AWS. Get a new identity token "
                           "from the identity provider and then retry the request.")
        akid, key = STATE.issue("irsa")
        self.send(200, "text/xml", """<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:accelfit:accelfit</SubjectFromWebIdentityToken>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <Arn>%s/%s</Arn>
      <AssumedRoleId>AROACLKWSDQRAOEXAMPLE:%s</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <SessionToken>%s</SessionToken>
      <SecretAccessKey>%s</SecretAccessKey>
      <Expiration>%s</Expiration>
      <AccessKeyId>%s</AccessKeyId>
    </Credentials>
    <Provider>arn:aws:iam::123456789012:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE</Provider>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>%s</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>
""" % (xml_escape(form["RoleArn"]), xml_escape(form["RoleSessionName"]),
       xml_escape(form["RoleSessionName"]), key["token"], key["secret"], iso(key["expires"]),
       akid, uuid.uuid4()))
        return {"issued": akid, "web_token": form["WebIdentityToken"],
                "session_name": form["RoleSessionName"]}

    def pod_identity(self):
        with STATE.lock:
            want = STATE.pod_token
        got = self.headers.get("Authorization")
        if not want or got != want:
            raise AwsError(401, "AccessDeniedException", "invalid authorization token")
        akid, key = STATE.issue("pod")
        self.send(200, "application/json", json.dumps({
            "AccessKeyId": akid, "SecretAccessKey": key["secret"], "Token": key["token"],
            "AccountId": "123456789012", "Expiration": iso(key["expires"])}))
        return {"issued": akid, "pod_token": got}


class Malformed(Exception):
    def __init__(self, ctype, body, status=200):
        super().__init__("malformed")
        self.ctype, self.body, self.status = ctype, body, status


def xml_escape(s):
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


# ---- control channel ----------------------------------------------------------------------

class AdminHandler(fake_server.AdminHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            a = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return self.reply({"error": "not JSON"}, 400)
        cmd = self.path.strip("/")
        s = STATE
        with s.lock:
            if cmd == "credentials":
                exp = a.get("expires_in")
                s.keys[a["akid"]] = {"secret": a["secret"], "token": a.get("token"),
                                     "expires": time.time() + exp if exp is not None else None}
            elif cmd == "web_token":
                s.web_token = a["token"]
                s.role_arn = a.get("role_arn")
            elif cmd == "pod_token":
                s.pod_token = a["token"]
            elif cmd == "duration":
                s.duration = a["seconds"]
            elif cmd == "on_demand":
                s.on_demand[a["region"]] = a["prices"]
            elif cmd == "spot":
                s.spot[a["region"]] = a["items"]
            elif cmd == "reservations":
                s.reservations[a["region"]] = a["items"]
                s.resv_denied = bool(a.get("denied", False))
            elif cmd == "page_size":
                s.page_size.update(a)
            elif cmd == "fault":
                s.faults.append(dict(a, count=a.get("count", 1)))
            elif cmd == "release":
                s.release.set()
                s.release = threading.Event()
            elif cmd == "expire_credentials":
                for k in s.keys.values():
                    if k["token"] is not None and k["expires"] is not None:
                        k["expires"] = time.time() - 1
            elif cmd == "requests":
                return self.reply(list(s.requests))
            elif cmd == "clear":
                s.requests.clear()
                s.faults.clear()
            else:
                return self.reply({"error": "unknown command " + cmd}, 404)
        self.reply({})


def main():
    global STATE, ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--admin-port", type=int, default=0)
    ap.add_argument("--verbose", action="store_true")
    ARGS = ap.parse_args()
    STATE = State()

    fake_server.serve(Handler, AdminHandler, ARGS.cert, ARGS.key, ARGS.port, ARGS.admin_port,
                      quiet_errors=not ARGS.verbose)

if __name__ == "__main__":
    main()
