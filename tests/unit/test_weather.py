"""weather() against a loopback server that mimics Open-Meteo's geocoding and forecast APIs."""

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from tools.errors import ToolError, ToolInputError, TransientToolError
from tools.weather import weather

PLACES = [
    {
        "id": 2950159,
        "name": "Berlin",
        "latitude": 52.52437,
        "longitude": 13.41053,
        "elevation": 74.0,
        "feature_code": "PPLC",
        "country_code": "DE",
        "admin1_id": 2950157,
        "timezone": "Europe/Berlin",
        "population": 3426354,
        "country_id": 2921044,
        "country": "Germany",
        "admin1": "State of Berlin",
    },
    {
        "id": 5746545,
        "name": "Portland",
        "latitude": 45.52345,
        "longitude": -122.67621,
        "elevation": 15.0,
        "feature_code": "PPLA2",
        "country_code": "US",
        "admin1_id": 5744337,
        "admin2_id": 5744076,
        "timezone": "America/Los_Angeles",
        "population": 652503,
        "country_id": 6252001,
        "country": "United States",
        "admin1": "Oregon",
        "admin2": "Multnomah",
    },
    {
        "id": 4975802,
        "name": "Portland",
        "latitude": 43.66147,
        "longitude": -70.25533,
        "elevation": 9.0,
        "feature_code": "PPLA2",
        "country_code": "US",
        "admin1_id": 4971068,
        "admin2_id": 4969163,
        "timezone": "America/New_York",
        "population": 66881,
        "country_id": 6252001,
        "country": "United States",
        "admin1": "Maine",
        "admin2": "Cumberland",
    },
]


@dataclass
class OpenMeteoState:
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    forced_status: dict[str, int] = field(default_factory=dict)  # path -> status to answer
    delay: float = 0.0


class OpenMeteoHandler(BaseHTTPRequestHandler):
    state: OpenMeteoState

    def do_GET(self):
        url = urlsplit(self.path)
        params = {key: values[-1] for key, values in parse_qs(url.query).items()}
        self.state.requests.append((url.path, params))
        time.sleep(self.state.delay)
        if url.path in self.state.forced_status:
            status = self.state.forced_status[url.path]
            self._reply(status, {"error": True, "reason": f"forced status {status}"})
        elif url.path == "/v1/search":
            self._reply(200, geocoding_response(params))
        elif url.path == "/v1/forecast":
            self._reply(200, forecast_response(params))
        else:
            self._reply(404, {"error": True, "reason": "Not Found"})

    def _reply(self, status: int, body: dict) -> None:
        payload = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (timeout test)

    def log_message(self, format, *args):
        pass


def geocoding_response(params: dict[str, str]) -> dict:
    matches = [place for place in PLACES if place["name"].lower() == params["name"].lower()]
    found = matches[: int(params["count"])]
    # Open-Meteo omits "results" entirely when nothing matches.
    return {"results": found, "generationtime_ms": 0.6} if found else {"generationtime_ms": 0.4}


def forecast_response(params: dict[str, str]) -> dict:
    days = int(params["forecast_days"])
    fahrenheit = params.get("temperature_unit") == "fahrenheit"
    temperature_unit = "°F" if fahrenheit else "°C"
    return {
        "latitude": round(float(params["latitude"]), 2),
        "longitude": round(float(params["longitude"]), 2),
        "generationtime_ms": 0.08,
        "utc_offset_seconds": 3600,
        "timezone": "Europe/Berlin",
        "timezone_abbreviation": "GMT+1",
        "elevation": 38.0,
        "current_units": {
            "time": "iso8601",
            "interval": "seconds",
            "temperature_2m": temperature_unit,
            "relative_humidity_2m": "%",
            "apparent_temperature": temperature_unit,
            "weather_code": "wmo code",
            "wind_speed_10m": "mp/h" if params.get("wind_speed_unit") == "mph" else "km/h",
        },
        "current": {
            "time": "2025-01-15T12:00",
            "interval": 900,
            "temperature_2m": 37.8 if fahrenheit else 3.2,
            "relative_humidity_2m": 81,
            "apparent_temperature": 31.3 if fahrenheit else -0.4,
            "weather_code": 61,
            "wind_speed_10m": 7.8 if params.get("wind_speed_unit") == "mph" else 12.6,
        },
        "daily_units": {
            "time": "iso8601",
            "weather_code": "wmo code",
            "temperature_2m_max": temperature_unit,
            "temperature_2m_min": temperature_unit,
            "precipitation_sum": "inch" if params.get("precipitation_unit") == "inch" else "mm",
        },
        "daily": {
            "time": [f"2025-01-{15 + day}" for day in range(days)],
            "weather_code": [[61, 3, 0, 95][day % 4] for day in range(days)],
            "temperature_2m_max": [4.0 + day for day in range(days)],
            "temperature_2m_min": [-1.0 + day for day in range(days)],
            "precipitation_sum": [0.5 * day for day in range(days)],
        },
    }


@pytest.fixture(scope="module")
def open_meteo_server():
    state = OpenMeteoState()
    handler = type("Handler", (OpenMeteoHandler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, state
    server.shutdown()
    server.server_close()


@pytest.fixture
def open_meteo(open_meteo_server, monkeypatch):
    server, state = open_meteo_server
    state.requests.clear()
    state.forced_status.clear()
    state.delay = 0.0
    base = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("OPEN_METEO_URL", base)
    monkeypatch.setenv("OPEN_METEO_GEOCODING_URL", base)
    monkeypatch.setenv("WEATHER_TIMEOUT", "5")
    return state


async def test_geocodes_then_fetches_forecast_with_expected_parameters(open_meteo):
    result = await weather("Berlin", days=3)

    assert [path for path, _ in open_meteo.requests] == ["/v1/search", "/v1/forecast"]
    geocoding, forecast = (params for _, params in open_meteo.requests)
    assert geocoding == {"name": "Berlin", "count": "1", "language": "en", "format": "json"}
    assert forecast == {
        "latitude": "52.52437",
        "longitude": "13.41053",
        "current": "temperature_2m,relative_humidity_2m,apparent_temperature,weather_code,wind_speed_10m",
        "daily": "weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum",
        "timezone": "auto",
        "forecast_days": "3",
        "temperature_unit": "celsius",
        "wind_speed_unit": "kmh",
        "precipitation_unit": "mm",
    }

    assert result["location"] == {
        "name": "Berlin",
        "region": "State of Berlin",
        "country": "Germany",
        "latitude": 52.52437,
        "longitude": 13.41053,
        "timezone": "Europe/Berlin",
    }
    assert result["units"] == {"temperature": "°C", "wind_speed": "km/h", "precipitation": "mm", "humidity": "%"}
    assert result["current"] == {
        "time": "2025-01-15T12:00",
        "temperature": 3.2,
        "apparent_temperature": -0.4,
        "relative_humidity": 81,
        "wind_speed": 12.6,
        "weather_code": 61,
        "description": "slight rain",
    }
    assert result["daily"] == [
        {
            "date": "2025-01-15",
            "description": "slight rain",
            "weather_code": 61,
            "temperature_max": 4.0,
            "temperature_min": -1.0,
            "precipitation_sum": 0.0,
        },
        {
            "date": "2025-01-16",
            "description": "overcast",
            "weather_code": 3,
            "temperature_max": 5.0,
            "temperature_min": 0.0,
            "precipitation_sum": 0.5,
        },
        {
            "date": "2025-01-17",
            "description": "clear sky",
            "weather_code": 0,
            "temperature_max": 6.0,
            "temperature_min": 1.0,
            "precipitation_sum": 1.0,
        },
    ]


async def test_imperial_units_are_requested_and_reported(open_meteo):
    result = await weather("Berlin", units="imperial")

    _, forecast = open_meteo.requests[-1]
    assert forecast["temperature_unit"] == "fahrenheit"
    assert forecast["wind_speed_unit"] == "mph"
    assert forecast["precipitation_unit"] == "inch"
    assert forecast["forecast_days"] == "1"
    assert result["units"]["temperature"] == "°F"
    assert result["units"]["precipitation"] == "inch"
    assert result["current"]["temperature"] == 37.8
    assert len(result["daily"]) == 1


async def test_region_after_comma_picks_the_matching_place(open_meteo):
    result = await weather("Portland, Maine")

    _, geocoding = open_meteo.requests[0]
    assert geocoding["name"] == "Portland"
    assert int(geocoding["count"]) > 1
    _, forecast = open_meteo.requests[1]
    assert (forecast["latitude"], forecast["longitude"]) == ("43.66147", "-70.25533")
    assert result["location"]["region"] == "Maine"


async def test_region_matching_no_candidate_lists_the_candidates(open_meteo):
    with pytest.raises(ToolInputError) as raised:
        await weather("Portland, Texas")

    message = str(raised.value)
    assert "Portland, Oregon, United States" in message
    assert "Portland, Maine, United States" in message
    assert all(path == "/v1/search" for path, _ in open_meteo.requests)


async def test_unknown_city_is_an_input_error(open_meteo):
    with pytest.raises(ToolInputError, match="No place found for 'Atlantis'"):
        await weather("Atlantis")

    assert [path for path, _ in open_meteo.requests] == ["/v1/search"]


@pytest.mark.parametrize("days", [0, -1, 17, 100])
async def test_days_out_of_range_is_an_input_error_before_any_request(open_meteo, days):
    with pytest.raises(ToolInputError, match="1 to 16"):
        await weather("Berlin", days=days)

    assert open_meteo.requests == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"city": "B"}, "at least 2"),
        ({"city": " , DE"}, "at least 2"),
        ({"city": "Berlin", "units": "kelvin"}, "metric"),
    ],
)
async def test_bad_city_or_units_is_an_input_error(open_meteo, kwargs, match):
    with pytest.raises(ToolInputError, match=match):
        await weather(**kwargs)

    assert open_meteo.requests == []


@pytest.mark.parametrize(("path", "status"), [("/v1/forecast", 500), ("/v1/search", 503), ("/v1/forecast", 429)])
async def test_server_errors_and_rate_limits_are_transient(open_meteo, path, status):
    open_meteo.forced_status[path] = status

    with pytest.raises(TransientToolError, match=f"HTTP {status}"):
        await weather("Berlin")


async def test_rejected_request_is_a_permanent_tool_error_with_reason(open_meteo):
    open_meteo.forced_status["/v1/forecast"] = 400

    with pytest.raises(ToolError, match="forced status 400") as raised:
        await weather("Berlin")

    assert not isinstance(raised.value, (TransientToolError, ToolInputError))


async def test_timeout_is_transient(open_meteo, monkeypatch):
    monkeypatch.setenv("WEATHER_TIMEOUT", "0.1")
    open_meteo.delay = 0.5

    with pytest.raises(TransientToolError, match="0.1 s"):
        await weather("Berlin")


async def test_unreachable_service_is_transient(open_meteo, monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    monkeypatch.setenv("OPEN_METEO_GEOCODING_URL", f"http://127.0.0.1:{closed_port}")

    with pytest.raises(TransientToolError, match="unreachable"):
        await weather("Berlin")
